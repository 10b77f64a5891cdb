import Fulfilment
import Kafka

/// One record of the worker's own topics, reduced to what `events tail` shows: never a purchase token, never a record
/// value, never a header beyond the dead-letter reason and provenance. Every field is `nil` when the record does not
/// say it in a form that can be read (hostile or damaged records still make an event, with the rest unknown).
public struct TailEvent: Sendable, Hashable {
    /// Which of the worker's topics the record came from.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case itemGranted = "item-granted"
        case consumeFailed = "consume-failed"
        case deadLetter = "dead-letter"
    }

    /// Where a dead-lettered message was read from (its `iap-original-*` headers).
    public struct Origin: Sendable, Hashable {
        public var topic: String
        public var partition: Int32
        public var offset: Int64

        public init(topic: String, partition: Int32, offset: Int64) {
            self.topic = topic
            self.partition = partition
            self.offset = offset
        }
    }

    public var kind: Kind
    /// The record's own coordinates.
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    /// The record's Kafka timestamp (milliseconds since the epoch).
    public var timestampMilliseconds: Int64?
    public var paymentSeq: String?
    public var userId: String?
    /// item-granted: `data.gamebaseProductId`.
    public var product: String?
    /// consume-failed: `data.reason`; dead-letter: the `iap-reason` header.
    public var reason: String?
    /// item-granted: `data.source` (`message` or `reconciliation`).
    public var grantSource: String?
    /// dead-letter: where the original message was read.
    public var origin: Origin?

    public init(
        kind: Kind, topic: String, partition: Int32, offset: Int64, timestampMilliseconds: Int64? = nil,
        paymentSeq: String? = nil, userId: String? = nil, product: String? = nil, reason: String? = nil,
        grantSource: String? = nil, origin: Origin? = nil
    ) {
        self.kind = kind
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestampMilliseconds = timestampMilliseconds
        self.paymentSeq = paymentSeq
        self.userId = userId
        self.product = product
        self.reason = reason
        self.grantSource = grantSource
        self.origin = origin
    }

    /// The `source` shown: item-granted's `data.source`, or a dead letter's origin as `topic[partition]@offset`.
    public var source: String? {
        if let origin { return "\(origin.topic)[\(origin.partition)]@\(origin.offset)" }
        return grantSource
    }
}

/// The worker's three output topics by kind (`kafka.topics.item_granted`, `consume_failed`, `dead_letter`).
public struct TailTopics: Sendable, Hashable {
    public var itemGranted: String
    public var consumeFailed: String
    public var deadLetter: String

    public init(itemGranted: String, consumeFailed: String, deadLetter: String) {
        self.itemGranted = itemGranted
        self.consumeFailed = consumeFailed
        self.deadLetter = deadLetter
    }

    /// The kind of a record of `topic`, `nil` for another topic.
    public func kind(of topic: String) -> TailEvent.Kind? {
        switch topic {
        case itemGranted: .itemGranted
        case consumeFailed: .consumeFailed
        case deadLetter: .deadLetter
        default: nil
        }
    }

    public var all: [String] { [itemGranted, consumeFailed, deadLetter] }
}

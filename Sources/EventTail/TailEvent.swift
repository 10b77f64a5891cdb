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
        /// A revocation (`gamebase.iap.item.revoked.v1`) on the item-revoked topic.
        case itemRevoked = "item-revoked"
        /// A refund undone (`gamebase.iap.refund.reversed.v1`), on the same topic.
        case refundReversed = "refund-reversed"
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
    /// item-granted, item-revoked, refund-reversed: `data.gamebaseProductId`.
    public var product: String?
    /// consume-failed, item-revoked, refund-reversed: `data.reason`; dead-letter: the `iap-reason` header.
    public var reason: String?
    /// item-granted: `data.source` (`message` or `reconciliation`); item-revoked, refund-reversed: `data.source` (how
    /// the store's notification came).
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

/// The worker's output topics by kind (`kafka.topics.item_granted`, `consume_failed`, `dead_letter`, `item_revoked`).
public struct TailTopics: Sendable, Hashable {
    public var itemGranted: String
    public var consumeFailed: String
    public var deadLetter: String
    public var itemRevoked: String

    public init(
        itemGranted: String, consumeFailed: String, deadLetter: String, itemRevoked: String = "iap.item-revoked"
    ) {
        self.itemGranted = itemGranted
        self.consumeFailed = consumeFailed
        self.deadLetter = deadLetter
        self.itemRevoked = itemRevoked
    }

    /// The kind of a record of `topic`, `nil` for another topic (a record of the item-revoked topic is an item-revoked
    /// one until its type says it is a reversal).
    public func kind(of topic: String) -> TailEvent.Kind? {
        switch topic {
        case itemGranted: .itemGranted
        case consumeFailed: .consumeFailed
        case deadLetter: .deadLetter
        case itemRevoked: .itemRevoked
        default: nil
        }
    }

    public var all: [String] { [itemGranted, consumeFailed, deadLetter, itemRevoked] }
}

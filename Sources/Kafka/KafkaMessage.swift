/// A record header: a name and an optional binary value.
public struct KafkaHeader: Hashable, Sendable {
    public var name: String
    public var value: [UInt8]?

    public init(name: String, value: [UInt8]?) {
        self.name = name
        self.value = value
    }

    public init(name: String, string: String) {
        self.init(name: name, value: Array(string.utf8))
    }

    /// The value as UTF-8 text, when it is valid UTF-8.
    public var stringValue: String? { value.flatMap { String(validating: $0, as: UTF8.self) } }
}

extension Array where Element == KafkaHeader {
    /// The last header with this name, as text.
    public func string(named name: String) -> String? {
        last { $0.name == name }?.stringValue
    }
}

/// A consumed record, copied out of librdkafka's memory.
public struct KafkaMessage: Sendable, Hashable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    /// Milliseconds since the epoch (create or log-append time), or `nil` when the broker gave none.
    public var timestampMilliseconds: Int64?
    public var key: [UInt8]?
    public var value: [UInt8]
    public var headers: [KafkaHeader]
    /// The assignment of its partition this message was fetched in (see ``KafkaConsumer/assignmentEpoch(for:)``):
    /// a message fetched before a revoke never belongs to a later assignment of the same partition.
    public var assignmentEpoch: UInt64

    public init(
        topic: String, partition: Int32, offset: Int64, timestampMilliseconds: Int64? = nil, key: [UInt8]? = nil,
        value: [UInt8], headers: [KafkaHeader] = [], assignmentEpoch: UInt64 = 0
    ) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestampMilliseconds = timestampMilliseconds
        self.key = key
        self.value = value
        self.headers = headers
        self.assignmentEpoch = assignmentEpoch
    }

    public var topicPartition: TopicPartition { TopicPartition(topic, partition) }

    /// The bytes this message holds in memory: value, key, header names and values, and what each header costs
    /// beyond its bytes (a `String` and an optional array, copied again when the flow takes it). A record of 1 MB
    /// can carry hundreds of thousands of empty headers: counted at their bytes alone, it would hold tens of times
    /// what the buffer's bound allows.
    public var byteCount: Int {
        var count = value.count + (key?.count ?? 0)
        for header in headers { count += Self.headerOverhead + header.name.utf8.count + (header.value?.count ?? 0) }
        return count
    }

    /// Memory a header holds besides its name and value bytes, in the consumer's copy and the flow's.
    static let headerOverhead = 128
}

/// A record to produce.
public struct KafkaProducerRecord: Sendable, Hashable {
    public var topic: String
    /// `nil` lets the partitioner choose from the key.
    public var partition: Int32?
    public var key: [UInt8]?
    public var value: [UInt8]
    public var headers: [KafkaHeader]

    public init(
        topic: String, partition: Int32? = nil, key: [UInt8]? = nil, value: [UInt8], headers: [KafkaHeader] = []
    ) {
        self.topic = topic
        self.partition = partition
        self.key = key
        self.value = value
        self.headers = headers
    }
}

/// Where a produced record landed.
public struct KafkaDeliveryReport: Sendable, Hashable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
}

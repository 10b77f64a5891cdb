/// A header of an inbound or outbound record.
public struct RecordHeader: Sendable, Hashable {
    public var name: String
    public var value: [UInt8]?

    public init(name: String, value: [UInt8]?) {
        self.name = name
        self.value = value
    }

    public init(name: String, string: String) {
        self.init(name: name, value: Array(string.utf8))
    }

    public var stringValue: String? { value.flatMap { String(validating: $0, as: UTF8.self) } }
}

/// A record the flow publishes: an event or a dead-letter record.
public struct OutboundRecord: Sendable, Hashable {
    public var topic: String
    public var key: [UInt8]?
    public var value: [UInt8]
    public var headers: [RecordHeader]

    public init(topic: String, key: [UInt8]?, value: [UInt8], headers: [RecordHeader]) {
        self.topic = topic
        self.key = key
        self.value = value
        self.headers = headers
    }

    /// The record of an outbox event. `ce_` headers, which outbox rows written by versions before 0.2 carry, are
    /// left out: the events are structured-mode CloudEvents (see ``EventFactory``).
    public init(_ event: OutboxEvent) {
        self.init(
            topic: event.topic, key: event.key, value: event.payload,
            headers: event.headers.filter { !$0.name.lowercased().hasPrefix("ce_") }.map {
                RecordHeader(name: $0.name, string: $0.value)
            })
    }
}

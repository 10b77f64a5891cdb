/// librdkafka properties for a client.
///
/// Every librdkafka property passes through unchanged (`security.protocol`, `sasl.*`, `ssl.*`, …);
/// an unknown property or a bad value fails when the client is created, with librdkafka's own message.
public struct KafkaConfiguration: Sendable, Hashable {
    /// The properties, by librdkafka name.
    public var properties: [String: String]

    public init(bootstrapServers: String, properties: [String: String] = [:]) {
        self.properties = properties
        self.properties["bootstrap.servers"] = bootstrapServers
    }

    public subscript(key: String) -> String? {
        get { properties[key] }
        set { properties[key] = newValue }
    }

    /// Sets `key` only where the caller has not chosen a value.
    mutating func setDefault(_ key: String, _ value: String) {
        if properties[key] == nil { properties[key] = value }
    }

    /// Property names whose values are secrets; they are shown as `<redacted>`.
    public static func isSecret(_ key: String) -> Bool {
        let lowered = key.lowercased()
        return lowered.contains("password") || lowered.contains("secret") || lowered.hasSuffix(".key.pem")
            || lowered.contains("sasl.oauthbearer.config") || lowered.contains("ssl.key")
    }

    /// The properties with secret values redacted, sorted by name, for display.
    public var redacted: [(key: String, value: String)] {
        properties.sorted { $0.key < $1.key }.map { ($0.key, Self.isSecret($0.key) ? "<redacted>" : $0.value) }
    }
}

/// Settings of a group consumer, on top of the raw librdkafka properties.
public struct KafkaConsumerConfiguration: Sendable {
    public var kafka: KafkaConfiguration
    public var groupID: String
    /// `group.instance.id`: static membership. On a real broker a restarted member with the same id gets its
    /// partitions back without a rebalance, within `session.timeout.ms`.
    public var groupInstanceID: String?
    /// How many fetched messages may wait in the consumer's buffer before it pauses fetching.
    public var maxBufferedMessages: Int
    /// How many bytes of fetched messages (``KafkaMessage/byteCount``) may wait in the consumer's buffer before it
    /// pauses fetching. One message larger than this is still delivered, alone.
    public var maxBufferedBytes: Int
    /// A group-less reader (``reader(bootstrapServers:groupIDPrefix:maxBufferedBytes:properties:)``): it reads partitions it assigns
    /// itself and never subscribes, commits or joins a group.
    public private(set) var isReader = false

    public init(
        bootstrapServers: String,
        groupID: String,
        groupInstanceID: String? = nil,
        maxBufferedMessages: Int = 10_000,
        maxBufferedBytes: Int = 64 << 20,
        properties: [String: String] = [:]
    ) {
        self.kafka = KafkaConfiguration(bootstrapServers: bootstrapServers, properties: properties)
        self.groupID = groupID
        self.groupInstanceID = groupInstanceID
        self.maxBufferedMessages = max(1, maxBufferedMessages)
        self.maxBufferedBytes = max(1, maxBufferedBytes)
    }

    /// A consumer that only reads the partitions given to ``KafkaConsumer/assign(_:)``: no subscription, no group
    /// membership, no commit, so it never disturbs any group. librdkafka's consumer API still wants a `group.id`; it
    /// gets a fresh one (`<prefix>-<random>`) that nothing ever commits to, and `enable.auto.commit` is forced off
    /// whatever `properties` say.
    public static func reader(
        bootstrapServers: String, groupIDPrefix: String = "reader", maxBufferedBytes: Int = 16 << 20,
        properties: [String: String] = [:]
    ) -> KafkaConsumerConfiguration {
        let suffix = String(UInt64.random(in: 0...UInt64.max), radix: 36)
        var configuration = KafkaConsumerConfiguration(
            bootstrapServers: bootstrapServers, groupID: "\(groupIDPrefix)-\(suffix)", maxBufferedMessages: 10_000,
            maxBufferedBytes: maxBufferedBytes, properties: properties)
        configuration.isReader = true
        return configuration
    }

    /// The classic group protocol's properties that librdkafka refuses under `group.protocol=consumer` (KIP-848).
    public static let classicGroupProtocolProperties: Set<String> = [
        "session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy", "group.protocol.type",
    ]

    /// Whether the group uses the next-generation consumer group protocol (KIP-848: `group.protocol=consumer`;
    /// librdkafka 2.12 or later and a broker that offers it), rather than the classic one.
    public var usesConsumerGroupProtocol: Bool { Self.namesConsumerGroupProtocol(kafka["group.protocol"]) }

    /// Whether a `group.protocol` value names the consumer protocol as librdkafka reads it (case and surrounding
    /// white space ignored: librdkafka takes " Consumer" too).
    public static func namesConsumerGroupProtocol(_ value: String?) -> Bool {
        value.map { String($0.lowercased().filter { !$0.isWhitespace }) } == "consumer"
    }

    /// The group protocol's name for people: `consumer` (KIP-848) or `classic`.
    public var groupProtocolName: String { usesConsumerGroupProtocol ? "consumer" : "classic" }

    /// The librdkafka properties the consumer is created with: the caller's, plus the defaults this layer
    /// depends on (explicit offset storing, cooperative-sticky assignment) where the caller set none.
    public var effectiveProperties: KafkaConfiguration {
        var config = kafka
        config["group.id"] = groupID
        if isReader {
            // Nothing a reader does may reach a group: no commits, no static membership.
            config["enable.auto.commit"] = "false"
            config["group.instance.id"] = nil
        } else if let groupInstanceID {
            config["group.instance.id"] = groupInstanceID
        }
        // Offsets are stored by the application for finished messages only; the stored ones are committed
        // in the background and synchronously on demand.
        config["enable.auto.offset.store"] = "false"
        config.setDefault("enable.auto.commit", "true")
        config.setDefault("auto.commit.interval.ms", "1000")
        if usesConsumerGroupProtocol {
            // KIP-848: the broker assigns, and librdkafka refuses the classic protocol's session, heartbeat and
            // assignor settings; none of this layer's defaults may add one (the caller's own are refused by
            // librdkafka with its message).
        } else {
            config.setDefault("partition.assignment.strategy", "cooperative-sticky")
        }
        config.setDefault("auto.offset.reset", "earliest")
        config.setDefault("enable.partition.eof", "false")
        return config
    }
}

/// Settings of a producer.
public struct KafkaProducerConfiguration: Sendable {
    public var kafka: KafkaConfiguration

    public init(bootstrapServers: String, properties: [String: String] = [:]) {
        self.kafka = KafkaConfiguration(bootstrapServers: bootstrapServers, properties: properties)
    }

    /// The caller's properties plus idempotent, fully acknowledged delivery where the caller set none.
    public var effectiveProperties: KafkaConfiguration {
        var config = kafka
        config.setDefault("enable.idempotence", "true")
        config.setDefault("acks", "all")
        config.setDefault("linger.ms", "5")
        return config
    }
}

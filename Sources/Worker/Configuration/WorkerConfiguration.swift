import Foundation
import Gamebase
import Kafka
import Logging

/// The worker's effective configuration (DESIGN §5), validated.
public struct WorkerConfiguration: Sendable {
    public struct Topics: Sendable, Hashable {
        public var purchases = "purchase.completed"
        public var itemGranted = "iap.item-granted"
        public var consumeFailed = "iap.consume-failed"
        public var deadLetter = "purchase.completed.dlq"
        public init() {}
    }

    public var bootstrapServers = "localhost:9092"
    public var groupID = "iap-worker"
    public var clientID = "iap-worker"
    public var groupInstanceID: String?
    public var topics = Topics()
    /// `kafka.librdkafka.*`, by librdkafka property name.
    public var librdkafka: [String: String] = [:]

    public var gamebaseBaseURL = GamebaseConfiguration.defaultBaseURL
    public var gamebaseAppID = ""
    public var gamebaseSecretKey = Secret("")
    public var gamebaseTimeoutMilliseconds = 10_000
    /// Defaults to `worker.max_in_flight`, at most `defaultMaxConnectionsLimit`.
    public var gamebaseMaxConnections = 512
    static let defaultMaxConnectionsLimit = 1_024

    public var ledgerURL = "sqlite:///var/lib/iap-worker/ledger.sqlite"

    public var maxInFlight = 512
    public var maxMessageBytes = 65_536
    public var retry = RetryPolicy(maxAttempts: 4, initialBackoff: .milliseconds(200), maxBackoff: .milliseconds(5_000))
    public var rejectTestPurchases = false
    public var shutdownTimeoutMilliseconds = 30_000

    public var serverPort = 8080
    public var logLevel = Logger.Level.info
    public var logFormat = LogFormat.json

    /// Sweeper cadence and grace period: grants and events younger than the grace period belong to the flow
    /// still running them.
    public var sweepInterval: Duration = .seconds(10)
    public var sweepGrace: Duration = .seconds(30)

    public enum LogFormat: String, Sendable, Hashable {
        case json, text
    }

    public init() {}

    /// librdkafka's session timeout unless `kafka.librdkafka.session.timeout.ms` says otherwise: 6 s, the
    /// lowest a real broker accepts by default. A Swift process has no garbage-collection pauses, so a short
    /// session costs nothing and a crashed instance's partitions move on quickly.
    public static let defaultSessionTimeoutMilliseconds = 6_000

    public var consumerConfiguration: KafkaConsumerConfiguration {
        var properties = [
            "client.id": clientID,
            "session.timeout.ms": String(Self.defaultSessionTimeoutMilliseconds),
            "heartbeat.interval.ms": "1500",
            "statistics.interval.ms": "5000",
            // A purchase waits on the broker for at most this long when its partition was idle (librdkafka's
            // 500 ms default is tuned for throughput, not for a player waiting for an item).
            "fetch.wait.max.ms": "100",
        ]
        properties.merge(librdkafka) { $1 }
        return KafkaConsumerConfiguration(
            bootstrapServers: bootstrapServers, groupID: groupID, groupInstanceID: groupInstanceID,
            maxBufferedMessages: max(1_000, maxInFlight * 4), properties: properties)
    }

    public var producerConfiguration: KafkaProducerConfiguration {
        // Consumer-only properties would make librdkafka warn on a producer.
        let consumerOnly: Set<String> = [
            "session.timeout.ms", "heartbeat.interval.ms", "auto.offset.reset", "enable.auto.commit", "max.poll.interval.ms",
            "partition.assignment.strategy", "group.instance.id", "auto.commit.interval.ms", "fetch.max.bytes",
            "max.partition.fetch.bytes", "fetch.wait.max.ms", "fetch.min.bytes", "queued.max.messages.kbytes",
        ]
        var properties = ["client.id": "\(clientID)-producer"]
        properties.merge(librdkafka.filter { !consumerOnly.contains($0.key) }) { $1 }
        return KafkaProducerConfiguration(bootstrapServers: bootstrapServers, properties: properties)
    }

    public var gamebaseConfiguration: GamebaseConfiguration {
        GamebaseConfiguration(
            baseURL: gamebaseBaseURL, appID: gamebaseAppID, secretKey: gamebaseSecretKey,
            timeoutMilliseconds: gamebaseTimeoutMilliseconds, consumeTimeoutMilliseconds: max(10_000, gamebaseTimeoutMilliseconds),
            maxConnections: gamebaseMaxConnections)
    }
}

/// A configuration value that cannot be used; names the key, never a secret value.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public var key: String
    public var problem: String
    public init(key: String, problem: String) {
        self.key = key
        self.problem = problem
    }
    public var description: String { "configuration key \(key): \(problem)" }
}

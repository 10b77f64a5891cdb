import AppStoreHTTP
import Console
import Engine
import Foundation
import Gamebase
import GamebaseHTTP
import GooglePlayHTTP
import Kafka
import Logging

/// The worker's effective configuration (DESIGN §5), validated.
public struct WorkerConfiguration: Sendable {
    public struct Topics: Sendable, Hashable {
        public var purchases = "purchase.completed"
        public var itemGranted = "iap.item-granted"
        public var consumeFailed = "iap.consume-failed"
        public var deadLetter = "purchase.completed.dlq"
        /// `""`: no store notifications are read.
        public var storeNotifications = "store.notifications"
        public var itemRevoked = "iap.item-revoked"
        public init() {}
    }

    /// `refunds.*`: which stores' refunds the worker takes in.
    public struct Refunds: Sendable {
        /// `refunds.google.package_name`; `nil`: Google notifications are refused.
        public var googlePackageName: String?
        /// `refunds.google.service_account_file` (read and checked at load): the account the Voided Purchases API
        /// poller authenticates as; `nil` when no poller runs.
        public var googleAccount: GoogleServiceAccount?
        public var googleServiceAccountFile: String?
        /// `refunds.google.base_url`: Google's host unless set.
        public var googleBaseURL = GooglePlayClient.productionURL
        public var googlePollInterval: Duration = .seconds(300)
        /// `refunds.apple.bundle_id`; `nil`: Apple notifications are refused.
        public var appleBundleId: String?
        /// `refunds.apple.environment`: `production` or `sandbox`.
        public var appleEnvironment = "production"
        /// `refunds.apple.root_certificates_file` (tests only): PEM roots trusted instead of Apple Root CA – G3.
        public var appleRootCertificatesFile: String?
        /// That file's text, read and checked when the configuration is loaded.
        public var appleRootCertificatesPEM: String?
        /// `refunds.max_clock_skew_ms`: how far a store's signed time may lie ahead of this host's clock.
        public var maxClockSkew: Duration = .seconds(300)
        /// `refunds.apple.issuer_id`, `key_id`, `private_key_file` (read and checked at load): the key the history
        /// poller signs with; `nil` when no poller runs.
        public var appleKey: AppStoreKey?
        public var applePrivateKeyFile: String?
        /// `refunds.apple.base_url`: Apple's host for the environment unless set.
        public var appleBaseURL: String?
        public var applePollInterval: Duration = .seconds(300)
        /// Keys of the consumption answers set while no answer is sent (said as warnings at start).
        public var unusedKeys: [String] = []
        /// `refunds.apple.consumption_info` and the statements sent with each answer; `nil`: requests are not answered.
        public var consumptionAnswers: ConsumptionAnswerer.Configuration?

        public init() {}

        /// Whether any store's refunds are taken in.
        public var isEnabled: Bool { googlePackageName != nil || appleBundleId != nil }

        /// The App Store Server API's base URL: the configured one, else Apple's host for the environment.
        public var appStoreURL: String {
            appleBaseURL ?? (appleEnvironment == "sandbox" ? AppStoreClient.sandboxURL : AppStoreClient.productionURL)
        }
    }

    public var bootstrapServers = "localhost:9092"
    public var groupID = "iap-worker"
    public var clientID = "iap-worker"
    public var groupInstanceID: String?
    public var topics = Topics()
    public var refunds = Refunds()
    /// `kafka.librdkafka.*`, by librdkafka property name.
    public var librdkafka: [String: String] = [:]
    /// What loading noticed but did not refuse (environment variables that look like ours and name no key): `run`
    /// logs them at start, `check-config` prints them.
    public var warnings: [String] = []

    public var gamebaseBaseURL = GamebaseConfiguration.defaultBaseURL
    public var gamebaseAppID = ""
    public var gamebaseSecretKey = Secret("")
    /// `gamebase.secret_key_file`, when the key came from a file: re-read while Gamebase refuses the key, so a
    /// fixed (rotated) secret is picked up without a restart.
    public var gamebaseSecretKeyFile: String?
    public var gamebaseTimeoutMilliseconds = 10_000
    /// Defaults to `worker.max_in_flight`, at most `defaultMaxConnectionsLimit`.
    public var gamebaseMaxConnections = 512
    static let defaultMaxConnectionsLimit = 1_024

    public var ledgerURL = "sqlite:///var/lib/iap-worker/ledger.sqlite"
    /// `ledger.min_free_bytes`: a SQLite ledger's floor of free space on its file system, below which intake pauses
    /// (0: no floor). 64 MiB: about 30,000 purchases' rows, and room for the pruner's deletes and a checkpoint.
    public var ledgerMinFreeBytes = 64 << 20

    public var maxInFlight = 512
    public var maxMessageBytes = 65_536
    /// `worker.max_buffered_bytes`: bytes of fetched records held at most — a quarter for librdkafka's prefetch
    /// queue, a quarter for records fetched and not yet started, half for records in flight.
    public var maxBufferedBytes = 64 << 20
    public var retry = RetryPolicy(maxAttempts: 4, initialBackoff: .milliseconds(200), maxBackoff: .milliseconds(5_000))
    public var rejectTestPurchases = false
    public var shutdownTimeoutMilliseconds = 30_000
    /// `reconcile.*`.
    public var reconcile = Reconciler.Configuration()
    /// `ledger.retention.*`.
    public var retention = RetentionPolicy()

    public var serverPort = 8080
    /// `console.*`. Off in a configuration made in code (tests run many workers in one process); loading a
    /// configuration turns it on at 127.0.0.1:8081 unless it says otherwise.
    public var console = ConsoleConfiguration.off
    /// `console.token_file`, for `check-config` (the token itself is only in ``console``'s access).
    public var consoleTokenFile: String?
    public var logLevel = Logger.Level.info
    public var logFormat = LogFormat.json

    /// Sweeper cadence and grace period: grants and events younger than the grace period belong to the flow
    /// still running them.
    public var sweepInterval: Duration = .seconds(10)
    public var sweepGrace: Duration = .seconds(30)
    /// The deadline of every ledger call.
    public var ledgerCallTimeout: Duration = .seconds(10)
    /// When the Gamebase circuit opens, and how often it is probed while open or stopped.
    public var breaker = CircuitBreaker.Configuration()

    public enum LogFormat: String, Sendable, Hashable {
        case json, text
    }

    public init() {}

    /// librdkafka's session timeout unless `kafka.librdkafka.session.timeout.ms` says otherwise: 6 s, the
    /// lowest a real broker accepts by default. A Swift process has no garbage-collection pauses, so a short
    /// session costs nothing and a crashed instance's partitions move on quickly.
    public static let defaultSessionTimeoutMilliseconds = 6_000

    /// The records librdkafka fetches ahead at most (`queued.min.messages` unless set): eight per purchase in flight,
    /// 2,000 at least and librdkafka's own largest, 10,000,000, at most (a configuration set in code is not held to
    /// the 65,536 `worker.max_in_flight` loading allows; the waiting buffer's four per purchase is capped alike).
    static func prefetchedRecords(maxInFlight: Int) -> Int { max(2_000, min(maxInFlight, 1_250_000) * 8) }

    /// About what one fetch brings per partition (`max.partition.fetch.bytes` unless set): a broker answers with whole
    /// batches, and a larger batch still comes whole.
    static let partitionFetchBytes = 65_536

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
        // librdkafka's prefetch queue (64 MiB by default, per consumer) gets its quarter of the byte budget; it also
        // caps fetch.max.bytes, which librdkafka lowers to it unless set.
        properties["queued.max.messages.kbytes"] = String(max(1_024, maxBufferedBytes / 4 / 1_024))
        // That byte bound counts values alone, and each record costs librdkafka a few hundred bytes more (its op and
        // message, the key and headers, the fetch response it points into): on a backlog of small records it held
        // nearly the whole topic, 13.6 MiB of the heap's 29.5 MiB peak in the mixed bench (docs/benchmarks.md). So the
        // prefetch is bounded in records too (the whole consumer's queue, not each partition's), eight per purchase in
        // flight, and a Kafka broker's answer to one fetch adds about 64 KiB of batches per partition to it (a
        // partition once answered with a larger batch keeps the larger fetch librdkafka grew for it). Once over the
        // bound, fetching waits: on librdkafka 2.0.2 until its broker thread next wakes, within a second; from 2.2 for
        // fetch.queue.backoff.ms, a second unless set, which the worker shortens to 100 ms.
        properties["queued.min.messages"] = String(Self.prefetchedRecords(maxInFlight: maxInFlight))
        if librdkafka["fetch.message.max.bytes"] == nil {  // the other name of max.partition.fetch.bytes
            properties["max.partition.fetch.bytes"] = String(Self.partitionFetchBytes)
        }
        if Librdkafka.version.knowsFetchQueueBackoff {
            properties["fetch.queue.backoff.ms"] = "100"
        }
        if KafkaConsumerConfiguration.namesConsumerGroupProtocol(librdkafka["group.protocol"]) {
            // KIP-848: the broker owns session and heartbeat timing; librdkafka refuses these under that protocol.
            for key in KafkaConsumerConfiguration.classicGroupProtocolProperties { properties[key] = nil }
        }
        // Producer-only properties would make librdkafka warn on a consumer (an operator tunes the producer's linger
        // through the same kafka.librdkafka.* keys).
        properties.merge(librdkafka.filter { !Self.producerOnly.contains($0.key) }) { $1 }
        return KafkaConsumerConfiguration(
            bootstrapServers: bootstrapServers, groupID: groupID, groupInstanceID: groupInstanceID,
            maxBufferedMessages: max(1_000, min(maxInFlight, 1_250_000) * 4),
            maxBufferedBytes: max(1, maxBufferedBytes / 4), properties: properties)
    }

    /// librdkafka properties of producers alone (marked P in its CONFIGURATION.md, aliases included), kept off the
    /// consumers and readers, where librdkafka would warn about each.
    static let producerOnly: Set<String> = [
        "linger.ms", "queue.buffering.max.ms", "queue.buffering.max.messages", "queue.buffering.max.kbytes",
        "queue.buffering.backpressure.threshold", "batch.num.messages", "batch.size", "acks", "request.required.acks",
        "request.timeout.ms", "enable.idempotence", "enable.gapless.guarantee", "compression.type",
        "compression.codec", "compression.level", "message.timeout.ms", "delivery.timeout.ms", "retries",
        "message.send.max.retries", "sticky.partitioning.linger.ms", "partitioner", "queuing.strategy",
        "delivery.report.only.error", "transactional.id", "transaction.timeout.ms",
    ]

    /// Whether the store-notifications topic is read: named, and a store configured to believe.
    public var readsStoreNotifications: Bool { !topics.storeNotifications.isEmpty && refunds.isEnabled }

    /// The consumer of the store-notifications topic: a group of its own (`<group_id>.store-notifications`), so its
    /// rebalances never move the purchases' partitions; a static member's id gets the same suffix.
    public var storeNotificationsConsumerConfiguration: KafkaConsumerConfiguration {
        var configuration = consumerConfiguration
        configuration.groupID = "\(groupID).store-notifications"
        configuration.groupInstanceID = groupInstanceID.map { "\($0).store-notifications" }
        configuration.maxBufferedMessages = 1_000
        configuration.maxBufferedBytes = 8 << 20
        return configuration
    }

    /// Bytes of records in flight at most (half of `worker.max_buffered_bytes`).
    public var maxInFlightBytes: Int { max(1, maxBufferedBytes / 2) }

    /// The largest record the consumer reads: librdkafka's `receive.message.max.bytes` (100,000,000 unless set).
    var largestReadableRecord: Int {
        librdkafka["receive.message.max.bytes"].flatMap { Int($0) } ?? 100_000_000
    }

    public var producerConfiguration: KafkaProducerConfiguration {
        // Consumer-only properties would make librdkafka warn on a producer.
        let consumerOnly: Set<String> = [
            "session.timeout.ms", "heartbeat.interval.ms", "auto.offset.reset", "enable.auto.commit",
            "max.poll.interval.ms",
            "partition.assignment.strategy", "group.instance.id", "auto.commit.interval.ms", "fetch.max.bytes",
            "max.partition.fetch.bytes", "fetch.wait.max.ms", "fetch.min.bytes", "queued.max.messages.kbytes",
            "queued.min.messages", "fetch.message.max.bytes", "fetch.queue.backoff.ms", "group.protocol",
            "group.remote.assignor",
        ]
        // A dead-letter record is the record read plus the worker's headers: the producer must accept whatever the
        // consumer can read, with room for them (librdkafka's own default, 1,000,000, is below a real broker's
        // 1,048,588, so a record near the size limit could not be dead-lettered whole).
        //
        // linger.ms 20, not librdkafka's 5: an idempotent producer allows five messages in flight per partition, and
        // while a partition is at that limit its broker thread wakes for every batch whose linger has run out and
        // polls again at once, until the broker answers. Against a broker slower than the linger that spun two of the
        // worker's threads for minutes on end (a steady 300 purchases/s, librdkafka 2.0.2 and 2.16 alike); lingering
        // longer than the broker's acknowledgements keeps the thread asleep, and fewer, larger requests keep the broker
        // quicker. It costs each event up to 20 ms before its Consume (docs/benchmarks.md).
        var properties = [
            "client.id": "\(clientID)-producer",
            "message.max.bytes": String(min(1_000_000_000, largestReadableRecord + 65_536)),
            "linger.ms": "20",
        ]
        properties.merge(librdkafka.filter { !consumerOnly.contains($0.key) }) { $1 }
        return KafkaProducerConfiguration(bootstrapServers: bootstrapServers, properties: properties)
    }

    public var gamebaseConfiguration: GamebaseConfiguration {
        GamebaseConfiguration(
            baseURL: gamebaseBaseURL, appID: gamebaseAppID, secretKey: gamebaseSecretKey,
            timeoutMilliseconds: gamebaseTimeoutMilliseconds,
            consumeTimeoutMilliseconds: max(10_000, gamebaseTimeoutMilliseconds),
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

import App
import Foundation
import Gamebase
import GamebaseHTTP
import GamebaseSimulator
import Kafka
import KafkaTesting
import Logging
import ServiceLifecycle

/// Everything a worker needs, inside one process and without configuration: librdkafka's mock cluster, the
/// Gamebase simulator on a loopback port and a temporary folder for a SQLite ledger. The demo and the
/// benchmark run on it; so can anyone trying the worker on a laptop.
public struct Sandbox: Sendable {
    public static let appID = "sandbox-app"
    public static let secretKey = "sandbox-secret-key"

    /// Topics and partition counts of a default configuration.
    public static var topics: [(name: String, partitions: Int)] { topics(named: WorkerConfiguration.Topics()) }

    /// The topics of `names` with the sandbox's partition counts.
    static func topics(named names: WorkerConfiguration.Topics) -> [(name: String, partitions: Int)] {
        [
            (names.purchases, 6), (names.itemGranted, 3), (names.consumeFailed, 3), (names.deadLetter, 1),
            (names.storeNotifications, 1), (names.itemRevoked, 1),
        ]
    }

    /// Kafka: librdkafka's mock cluster in this process, or a cluster named by its bootstrap servers.
    public let cluster: any KafkaEndpoint
    /// Put before each topic's name (``topicNames``): empty on the mock cluster; on an external cluster, a prefix of
    /// the sandbox's own, so no two runs share a topic.
    public let topicPrefix: String
    public let simulator: GamebaseSimulator
    public let simulatorURL: String
    /// Holds the ledger; removed when the sandbox ends.
    public let folder: URL

    public var ledgerURL: String { "sqlite://" + folder.appendingPathComponent("ledger.sqlite").path }

    /// Starts a sandbox, runs `body` with it, and tears it down (the simulator stops, the folder is removed).
    ///
    /// - Parameters:
    ///   - brokers: mock brokers to start.
    ///   - payments: the payments Gamebase knows about at the start (more can be added to `simulator.state`).
    ///   - bootstrapServers: an external Kafka cluster instead of the mock (its topics get a prefix of this sandbox's
    ///     own; they are left on the cluster afterwards).
    public static func with<T: Sendable>(
        brokers: Int = 1, bootstrapServers: String? = nil, payments: [SimulatedPayment] = [],
        faults: SimulatorFaults = SimulatorFaults(), logger: Logger, _ body: @Sendable (Sandbox) async throws -> T
    ) async throws -> T {
        let cluster: any KafkaEndpoint
        let topicPrefix: String
        if let bootstrapServers {
            cluster = try ExternalKafka(bootstrapServers: bootstrapServers, logger: logger)
            topicPrefix = "sandbox-\(UUID().uuidString.prefix(8).lowercased())."
        } else {
            cluster = try MockCluster(brokers: brokers, logger: logger)
            topicPrefix = ""
        }
        for topic in topics(named: topicNames(prefix: topicPrefix)) {
            try cluster.createTopic(topic.name, partitions: topic.partitions)
        }
        let simulator = GamebaseSimulator(
            configuration: .init(appID: appID, secretKey: secretKey),
            state: SimulatorState(payments: payments, faults: faults),
            logger: logger)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "iap-sandbox-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // The simulator runs in a service group of its own so it can stop gracefully (cancelling it would
        // make Hummingbird log an error).
        let services = ServiceGroup(services: [simulator], logger: logger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await services.run()
                return nil
            }
            do {
                let sandbox = Sandbox(
                    cluster: cluster, topicPrefix: topicPrefix, simulator: simulator,
                    simulatorURL: await simulator.baseURL(), folder: folder)
                let result = try await body(sandbox)
                await services.triggerGracefulShutdown()
                try await group.waitForAll()
                return result
            } catch {
                await services.triggerGracefulShutdown()
                try? await group.waitForAll()
                throw error
            }
        }
    }

    /// The sandbox's name of one of ``topics``.
    /// The worker's topic names in this sandbox: the defaults, with the sandbox's prefix.
    public var topicNames: WorkerConfiguration.Topics { Self.topicNames(prefix: topicPrefix) }

    static func topicNames(prefix: String) -> WorkerConfiguration.Topics {
        var names = WorkerConfiguration.Topics()
        names.purchases = prefix + names.purchases
        names.itemGranted = prefix + names.itemGranted
        names.consumeFailed = prefix + names.consumeFailed
        names.deadLetter = prefix + names.deadLetter
        names.storeNotifications = prefix + names.storeNotifications
        names.itemRevoked = prefix + names.itemRevoked
        return names
    }

    /// The worker's environment variables naming the sandbox's topics (none on the mock: the defaults).
    public var topicEnvironment: [String: String] {
        guard !topicPrefix.isEmpty else { return [:] }  // the mock's topics are the defaults
        let names = topicNames
        return [
            "KAFKA_TOPICS_PURCHASES": names.purchases, "KAFKA_TOPICS_ITEM_GRANTED": names.itemGranted,
            "KAFKA_TOPICS_CONSUME_FAILED": names.consumeFailed, "KAFKA_TOPICS_DEAD_LETTER": names.deadLetter,
            "KAFKA_TOPICS_STORE_NOTIFICATIONS": names.storeNotifications,
            "KAFKA_TOPICS_ITEM_REVOKED": names.itemRevoked,
        ]
    }

    /// A worker configuration pointing at the sandbox, with the defaults of `iap-worker run` otherwise, a
    /// session timeout short enough for the mock broker's rebalances, and quick retries.
    public func workerConfiguration(groupID: String = "iap-worker") -> WorkerConfiguration {
        var configuration = WorkerConfiguration()
        configuration.bootstrapServers = cluster.bootstrapServers
        configuration.groupID = groupID
        configuration.topics = topicNames
        configuration.librdkafka = ["session.timeout.ms": "6000", "heartbeat.interval.ms": "500"]
        configuration.gamebaseBaseURL = simulatorURL
        configuration.gamebaseAppID = Self.appID
        configuration.gamebaseSecretKey = Secret(Self.secretKey)
        configuration.gamebaseTimeoutMilliseconds = 2_000
        configuration.ledgerURL = ledgerURL
        configuration.retry = RetryPolicy(
            maxAttempts: 4, initialBackoff: .milliseconds(50), maxBackoff: .milliseconds(500))
        configuration.sweepInterval = .seconds(2)
        configuration.sweepGrace = .seconds(3)
        return configuration
    }

    /// Produces `records` to their topics and waits for every delivery report.
    public func produce(_ records: [KafkaProducerRecord], logger: Logger) async throws {
        let producer = try KafkaProducer(
            configuration: .init(bootstrapServers: cluster.bootstrapServers, properties: ["linger.ms": "5"]),
            logger: logger)
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for record in records {
                    group.addTask { _ = try await producer.send(record) }
                }
                try await group.waitForAll()
            }
        } catch {
            await producer.close()
            throw error
        }
        await producer.close()
    }
}

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
    public static let topics: [(name: String, partitions: Int)] = [
        ("purchase.completed", 6), ("iap.item-granted", 3), ("iap.consume-failed", 3), ("purchase.completed.dlq", 1),
    ]

    public let cluster: MockCluster
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
    public static func with<T: Sendable>(
        brokers: Int = 1, payments: [SimulatedPayment] = [], faults: SimulatorFaults = SimulatorFaults(),
        logger: Logger, _ body: @Sendable (Sandbox) async throws -> T
    ) async throws -> T {
        let cluster = try MockCluster(brokers: brokers, logger: logger)
        for topic in topics { try cluster.createTopic(topic.name, partitions: topic.partitions) }
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
                    cluster: cluster, simulator: simulator, simulatorURL: await simulator.baseURL(), folder: folder)
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

    /// A worker configuration pointing at the sandbox, with the defaults of `iap-worker run` otherwise, a
    /// session timeout short enough for the mock broker's rebalances, and quick retries.
    public func workerConfiguration(groupID: String = "iap-worker") -> WorkerConfiguration {
        var configuration = WorkerConfiguration()
        configuration.bootstrapServers = cluster.bootstrapServers
        configuration.groupID = groupID
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

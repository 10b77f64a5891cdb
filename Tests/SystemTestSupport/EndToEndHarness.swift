import App
import Foundation
import Fulfilment
import Gamebase
import GamebaseHTTP
import GamebaseSimulator
import IAPTestSupport
import Kafka
import KafkaTesting
import Ledger
import Logging
import ServiceLifecycle
import Synchronization

/// A whole system in one process: librdkafka's mock cluster, the Gamebase simulator over HTTP, a real ledger,
/// and workers built by the same composition root as `iap-worker run`.
struct EndToEndSystem: Sendable {
    static let appID = "e2e-app"
    static let secretKey = "e2e-secret"
    static let topics = [
        "purchase.completed": 6, "iap.item-granted": 1, "iap.consume-failed": 1, "purchase.completed.dlq": 1,
        "store.notifications": 2, "iap.item-revoked": 1,
    ]

    let cluster: MockCluster
    let simulator: GamebaseSimulator
    let simulatorURL: String
    let ledgerURL: String
    let groupID = "e2e-\(UUID().uuidString.prefix(8))"

    static var logger: Logger {
        var logger = Logger(label: "e2e")
        logger.logLevel = ProcessInfo.processInfo.environment["E2E_LOG"] != nil ? .info : .critical
        return logger
    }

    static func run<T: Sendable>(
        _ backend: LedgerBackend = .sqlite, payments: [SimulatedPayment],
        faults: SimulatorFaults = SimulatorFaults(unknownFieldRate: 0.2),
        _ body: @Sendable (EndToEndSystem) async throws -> T
    ) async throws -> T {
        let cluster = try MockCluster(brokers: 1, logger: logger)
        for (topic, partitions) in topics { try cluster.createTopic(topic, partitions: partitions) }
        let simulator = GamebaseSimulator(
            configuration: .init(appID: appID, secretKey: secretKey),
            state: SimulatorState(payments: payments, faults: faults),
            logger: logger)
        let ledgerURL = try await TestDatabases.freshLedgerURL(backend)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await simulator.run()
                return nil
            }
            let system = EndToEndSystem(
                cluster: cluster, simulator: simulator, simulatorURL: await simulator.baseURL(), ledgerURL: ledgerURL)
            defer { group.cancelAll() }
            return try await body(system)
        }
    }

    func configuration(secretKey: String = Self.secretKey, maxInFlight: Int = 64) -> WorkerConfiguration {
        var configuration = WorkerConfiguration()
        configuration.bootstrapServers = cluster.bootstrapServers
        configuration.groupID = groupID
        configuration.librdkafka = [
            "session.timeout.ms": "3000", "heartbeat.interval.ms": "300", "auto.commit.interval.ms": "200",
        ]
        configuration.gamebaseBaseURL = simulatorURL
        configuration.gamebaseAppID = Self.appID
        configuration.gamebaseSecretKey = Secret(secretKey)
        configuration.gamebaseTimeoutMilliseconds = 2_000
        configuration.ledgerURL = ledgerURL
        configuration.maxInFlight = maxInFlight
        configuration.retry = RetryPolicy(
            maxAttempts: 3, initialBackoff: .milliseconds(10), maxBackoff: .milliseconds(50))
        configuration.serverPort = 0
        configuration.sweepInterval = .seconds(1)
        configuration.sweepGrace = .seconds(2)
        return configuration
    }

    /// Runs one worker while `body` runs, then shuts it down gracefully.
    func withWorker<T: Sendable>(
        _ configuration: WorkerConfiguration, _ body: @Sendable (WorkerApplication.Parts) async throws -> T
    ) async throws -> T {
        try await LedgerStores.withStore(url: configuration.ledgerURL, logger: Self.logger) { store in
            let ledger = store.roles
            let metrics = WorkerMetrics()
            let gamebase = GamebaseClient(
                configuration: configuration.gamebaseConfiguration, logger: Self.logger,
                observer: { metrics.recordGamebase(api: $0, result: $1, seconds: $2) })
            let (serviceGroup, parts) = try WorkerApplication.buildServiceGroup(
                configuration: configuration, ledger: ledger, gamebase: gamebase, signals: false, metrics: metrics,
                adminHost: "127.0.0.1", logger: Self.logger)
            return try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask {
                    try await serviceGroup.run()
                    return nil
                }
                do {
                    let result = try await body(parts)
                    await serviceGroup.triggerGracefulShutdown()
                    try await group.waitForAll()
                    return result
                } catch {
                    await serviceGroup.triggerGracefulShutdown()
                    try? await group.waitForAll()
                    throw error
                }
            }
        }
    }

    func produce(_ values: [(key: String, value: String)], to topic: String = "purchase.completed") async throws {
        let producer = try KafkaProducer(
            configuration: .init(bootstrapServers: cluster.bootstrapServers), logger: Self.logger)
        for (key, value) in values {
            try await producer.send(KafkaProducerRecord(topic: topic, key: Array(key.utf8), value: Array(value.utf8)))
        }
        await producer.close()
    }

    /// Everything on `topic` so far (to its high watermarks, then until no record arrives for `quiet`).
    func read(_ topic: String, quiet: Duration = .seconds(2)) async throws -> [KafkaMessage] {
        try await KafkaConsumer.readWhole(
            topic: topic, bootstrapServers: cluster.bootstrapServers, logger: Self.logger, quiet: quiet)
    }

    /// Polls until `condition` holds; fails the test after `seconds`.
    func eventually(_ what: String, within seconds: Double = 30, _ condition: () async throws -> Bool) async throws {
        try await waitUntil(what, within: .seconds(seconds), every: .milliseconds(200), condition)
    }

    static func payment(
        _ seq: String, user: String, type: String = GamebaseProductType.consumable, consumed: Bool = false
    ) -> SimulatedPayment {
        SimulatedPayment(
            PaymentTransaction(
                paymentSeq: seq, userId: user, productSeq: 7, currency: "USD", price: Decimal(string: "4.99"),
                marketId: "GG",
                accessToken: "tok-\(seq)", paymentId: "GPA.\(seq)", productType: type, gamebaseProductId: "gems_500",
                purchaseTime: "2024-05-13T10:20:30+09:00", isTestPurchase: false),
            consumed: consumed)
    }

    static func message(_ seq: String, user: String, token: String? = nil) -> String {
        #"{"userId":"\#(user)","paymentSeq":"\#(seq)","purchaseToken":"\#(token ?? "tok-\(seq)")","storeCode":"GG"}"#
    }
}

extension KafkaMessage {
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(value)) as? [String: Any]) ?? [:] }
    var eventID: String? { json["id"] as? String }
    var reason: String? { (json["data"] as? [String: Any])?["reason"] as? String }
}

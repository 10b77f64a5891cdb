import Foundation
import Fulfilment
import Gamebase
import GamebaseSimulator
import IAPTestSupport
import Kafka
import KafkaTesting
import Ledger
import Testing

/// The built executables against Kafka over TCP (`iap-dev dev-kafka`, librdkafka's mock cluster, or a Tansu broker
/// process when `IAP_TEST_KAFKA_BROKER=tansu`), `iap-dev gamebase-sim` over HTTP and real databases: what every process
/// test starts its workers against.
struct ProcessCluster {
    let folder: URL
    /// The Kafka endpoint: `dev-kafka` as a process (the mock) or a Tansu broker; stopped when the last copy of
    /// the cluster is released.
    let kafka: KafkaUnderTest
    let simulator: ChildProcess
    let bootstrap: String
    let simulatorURL: String
    let purchases: Int

    /// dev-kafka and gamebase-sim as processes, seeded with `purchases` valid payments.
    /// - Parameter payments: Gamebase's payments, `p<i>` of Google's by default.
    static func start(
        purchases: Int, simulatorArguments: [String], kafka kind: KafkaEndpointKind = .underTest,
        payments given: [SimulatedPayment]? = nil
    ) async throws -> ProcessCluster {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "iap-process-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let payments = given ?? (0..<purchases).map { EndToEndSystem.payment("p\($0)", user: "u\($0)") }
        let paymentsFile = folder.appendingPathComponent("payments.json")
        try JSONEncoder().encode(payments).write(to: paymentsFile)
        let kafka = try await KafkaUnderTest.start(
            topics: [
                ("purchase.completed", 6), ("iap.item-granted", 1), ("iap.consume-failed", 1),
                ("purchase.completed.dlq", 1), ("store.notifications", 2), ("iap.item-revoked", 1),
            ], kind: kind, folder: folder)
        let simulator = try ChildProcess(
            "gamebase-sim",
            [
                "gamebase-sim", "--port", "0", "--app-id", EndToEndSystem.appID, "--secret-key",
                EndToEndSystem.secretKey,
                "--payments", paymentsFile.path,
            ] + simulatorArguments, folder: folder)
        return ProcessCluster(
            folder: folder, kafka: kafka, simulator: simulator, bootstrap: kafka.bootstrapServers,
            simulatorURL: try await simulator.firstLine(), purchases: purchases)
    }

    func workerEnvironment(ledgerURL: String, group: String, maxInFlight: Int = 64) -> [String: String] {
        [
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "KAFKA_GROUP_ID": group, "GAMEBASE_BASE_URL": simulatorURL,
            "GAMEBASE_APP_ID": EndToEndSystem.appID, "GAMEBASE_SECRET_KEY": EndToEndSystem.secretKey,
            "GAMEBASE_TIMEOUT_MS": "1500", "LEDGER_URL": ledgerURL, "SERVER_PORT": "0", "CONSOLE_PORT": "0",
            "LOG_FORMAT": "json",
            "WORKER_MAX_IN_FLIGHT": String(maxInFlight), "WORKER_RETRY_INITIAL_BACKOFF_MS": "20",
            "WORKER_RETRY_MAX_BACKOFF_MS": "200", "KAFKA_LIBRDKAFKA_SESSION_TIMEOUT_MS": "3000",
            "KAFKA_LIBRDKAFKA_HEARTBEAT_INTERVAL_MS": "300", "IAP_WORKER_CONFIG": "",
        ]
    }

    func worker(_ name: String, _ environment: [String: String]) throws -> ChildProcess {
        try ChildProcess(name, ["run"], environment: environment, folder: folder)
    }

    func producePurchases() async throws {
        try await produce(range: 0..<purchases)
    }

    /// Produces the messages of purchases `p<i>` for `i` in `range`, all at once.
    func produce(range: Range<Int>) async throws {
        let producer = try KafkaProducer(
            configuration: .init(bootstrapServers: bootstrap), logger: EndToEndSystem.logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in range {
                group.addTask {
                    try await producer.send(
                        KafkaProducerRecord(
                            topic: "purchase.completed", key: Array("u\(i)".utf8),
                            value: Array(EndToEndSystem.message("p\(i)", user: "u\(i)").utf8)))
                }
            }
            try await group.waitForAll()
        }
        await producer.close()
    }

    /// Produces purchase messages (key, value) to `purchase.completed`, one after another (in order per key).
    func produce(_ messages: [(key: String, value: String)]) async throws {
        let producer = try KafkaProducer(
            configuration: .init(bootstrapServers: bootstrap), logger: EndToEndSystem.logger)
        for (key, value) in messages {
            try await producer.send(
                KafkaProducerRecord(topic: "purchase.completed", key: Array(key.utf8), value: Array(value.utf8)))
        }
        await producer.close()
    }

    /// Waits until the simulator has consumed every purchase and the ledger records each as consumed (a
    /// grant whose Consume answer was lost to a kill is finished on redelivery or by the sweeper); fails
    /// early when a worker has exited.
    func waitUntilAllConsumed(within seconds: Double, workers: [ChildProcess], ledgerURL: String) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        var simulatorCount = 0
        var ledger: LedgerStats?
        var unopened: LedgerError?
        while Date() < deadline {
            if let exited = workers.first(where: { !$0.isRunning }) {
                throw ProcessTestError("\(exited.name) exited early:\n\(exited.diagnosticOutput)")
            }
            simulatorCount = (try? await simulatorConsumes(simulatorURL).count) ?? simulatorCount
            do {
                ledger = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) {
                    try await $0.stats()
                }
                unopened = nil
            } catch let error as LedgerError where error.code == .unavailable {
                // The worker creates the ledger as this polls it: a SQLite file held locked for its creation ("database
                // is locked", seen once in CI) is not readable yet, not broken. One that never opens ends in the
                // timeout below, which names the error.
                unopened = error
            }
            if simulatorCount == purchases, ledger?.consumed == purchases { return }
            try await Task.sleep(for: .milliseconds(250))
        }
        throw ProcessTestError(
            "not every purchase was consumed within \(seconds) s: Gamebase consumed \(simulatorCount) of \(purchases), "
                + "ledger \(ledger.map { "\($0)" } ?? "unread")\(unopened.map { " (last open: \($0))" } ?? "")\n"
                + (try await unfinishedPurchases(ledgerURL: ledgerURL)) + "\n"
                + workers.map(\.diagnosticOutput).joined(separator: "\n") + "\nKafka (\(kafka.kind)), last lines:\n"
                + kafka.diagnosticOutput.split(separator: "\n").suffix(40).joined(separator: "\n"))
    }

    /// The purchases not consumed at Gamebase or not recorded as consumed, with their ledger rows: what a
    /// timeout needs explained.
    func unfinishedPurchases(ledgerURL: String) async throws -> String {
        let consumed = (try? await simulatorConsumes(simulatorURL)) ?? [:]
        let rows = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) { store in
            var rows: [(String, GrantRecord?)] = []
            for paymentSeq in (0..<purchases).map({ "p\($0)" }) {
                let grant = try await store.grant(paymentSeq: paymentSeq)
                if consumed[paymentSeq] == nil || grant?.state != .consumed { rows.append((paymentSeq, grant)) }
            }
            return rows
        }
        let described = rows.prefix(10).map { paymentSeq, grant in
            "  \(paymentSeq): Gamebase consumes \(consumed[paymentSeq] ?? 0), ledger "
                + (grant.map { Self.describe($0) } ?? "no grant")
        }
        return (["unfinished purchases: \(rows.count)"] + described).joined(separator: "\n")
    }

    static func describe(_ grant: GrantRecord) -> String {
        let lastCode = grant.lastResultCode.map(String.init) ?? "-"
        let source = grant.source.map { "\($0)" } ?? "-"
        return
            "\(grant.state) since \(grant.grantedAt), \(grant.consumeAttempts) failed consumes (last code \(lastCode)), from \(source)"
    }

    /// The money invariants: each purchase consumed once at Gamebase, granted once, one item-granted id.
    func expectInvariants(ledgerURL: String) async throws {
        let consumes = try await simulatorConsumes(simulatorURL)
        #expect(consumes.count == purchases, "no purchase lost")
        #expect(consumes.values.allSatisfy { $0 == 1 }, "none consumed twice")
        let stats = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) {
            try await $0.stats()
        }
        #expect(stats.consumed == purchases, "each granted once and consumed")
        #expect(stats.rejections.isEmpty)
        let granted = try await readTopic("iap.item-granted")
        #expect(
            Set(granted.compactMap(\.eventID)) == Set((0..<purchases).map { "p\($0):item-granted" }),
            "one event id per purchase")
        #expect(try await readTopic("purchase.completed.dlq").isEmpty)
    }

    func readTopic(_ topic: String) async throws -> [KafkaMessage] {
        try await KafkaConsumer.readWhole(topic: topic, bootstrapServers: bootstrap, logger: EndToEndSystem.logger)
    }
}

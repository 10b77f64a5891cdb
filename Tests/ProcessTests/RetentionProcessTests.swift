import Foundation
import Fulfilment
import IAPTestSupport
import Kafka
import Ledger
import Testing

@testable import SystemTestSupport

/// The daemon keeps its ledger on its own schedule, whatever Kafka does.
@Suite("Ledger retention in the daemon", .serialized, .timeLimit(.minutes(3)))
struct RetentionProcessTests {
    /// `iap-worker run` with nothing listening at its broker's or Gamebase's address: it never reaches either.
    static func isolatedWorker(ledgerURL: String, _ extra: [String: String], folder: URL) throws -> ChildProcess {
        let environment = [
            "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "GAMEBASE_BASE_URL": "http://127.0.0.1:1",
            "GAMEBASE_APP_ID": EndToEndSystem.appID, "GAMEBASE_SECRET_KEY": EndToEndSystem.secretKey,
            "LEDGER_URL": ledgerURL, "SERVER_PORT": "0", "CONSOLE_PORT": "0", "LOG_FORMAT": "json",
            "IAP_WORKER_CONFIG": "",
        ].merging(extra) { $1 }
        return try ChildProcess("worker", ["run"], environment: environment, folder: folder)
    }

    @Test func aWorkerWhoseBrokerIsUnreachablePrunesItsLedgerWithinAMinuteOfStart() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "iap-retention-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let ledgerURL = "sqlite://\(folder.path)/ledger.sqlite"
        let old = Date().addingTimeInterval(-10 * 86_400)
        try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) { store in
            for i in 0..<50 {
                let grant = GrantRecord(
                    paymentSeq: "old-\(i)", userId: "u\(i)", gamebaseProductId: "gem", purchaseToken: "tok-\(i)",
                    productSeq: 1, marketId: "GG", productType: "CONSUMABLE", price: "1", currency: "KRW",
                    paymentId: "GPA.old-\(i)", isTestPurchase: false, purchaseTime: nil, payload: nil, grantedAt: old,
                    source: nil)
                _ = try await store.insertGrant(
                    grant,
                    event: OutboxEvent(
                        id: "old-\(i):item-granted", paymentSeq: "old-\(i)", topic: "iap.item-granted", key: nil,
                        headers: [],
                        payload: Array("{}".utf8), createdAt: old, publishedAt: old))
                _ = try await store.markConsumed(paymentSeq: "old-\(i)", resultCode: 0, at: old)
            }
        }
        let worker = try Self.isolatedWorker(ledgerURL: ledgerURL, ["RECONCILE_INTERVAL_MS": "0"], folder: folder)
        let pass = try await worker.waitForLog("ledger pruning pass", within: 75)
        #expect(pass["prune.published_outbox"] as? String == "50")
        #expect(try await worker.terminate() == 0)
        try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) { (store) async throws in
            let event = try await store.event(id: "old-0:item-granted")
            #expect(event == nil)
            let stats = try await store.stats()
            #expect(stats.consumed == 50, "every grant kept")
        }
    }

    @Test func aWorkerWithPruningOffRunsUntilItIsStopped() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "iap-retention-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let worker = try Self.isolatedWorker(
            ledgerURL: "sqlite://\(folder.path)/ledger.sqlite", ["LEDGER_RETENTION_INTERVAL_MS": "0"], folder: folder)
        let port = try await worker.adminPort()
        try await Task.sleep(for: .seconds(3))
        #expect(worker.isRunning, "\(worker.diagnosticOutput)")
        let metrics = try await httpGet("http://127.0.0.1:\(port)/metrics")
        #expect(metrics.body.contains("iap_ledger_prune_caught_up_timestamp_seconds 0"))
        #expect(try await worker.terminate() == 0)
    }

    @Test func aFloodOfForgedClaimsThroughTheWorkerIsHeldToTheBoundWhilePurchasesAreGranted() async throws {
        let cluster = try await ProcessTests.Cluster.start(purchases: 300, simulatorArguments: ["--latency-ms", "2"])
        let ledgerURL = try await TestDatabases.freshLedgerURL(.postgres)
        var environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "flood-\(UUID().uuidString.prefix(6))", maxInFlight: 64)
        environment["LEDGER_RETENTION_MAX_UNCONFIRMED_ROWS"] = "1000"
        environment["LEDGER_RETENTION_BATCH_ROWS"] = "100"
        environment["LEDGER_RETENTION_INTERVAL_MS"] = "2000"
        let worker = try cluster.worker("worker", environment)
        _ = try await worker.adminPort()
        // Claims of payments that do not exist, each under its own made-up user: one rejection row each.
        func flood(_ range: Range<Int>) async throws {
            try await cluster.produce(
                range.map { ("attacker-\($0)", EndToEndSystem.message("forged-\($0)", user: "attacker-\($0)")) })
        }
        try await flood(0..<2_000)
        try await cluster.produce(range: 0..<150)
        try await worker.waitForLog("ledger pruning pass", within: 90)
        try await flood(2_000..<2_600)
        try await cluster.produce(range: 150..<300)
        try await cluster.waitUntilAllConsumed(within: 120, workers: [worker], ledgerURL: ledgerURL)
        // Every forged claim judged, then a pass after the last of them.
        let deadline = Date().addingTimeInterval(60)
        var rejected = 0
        while Date() < deadline {
            rejected = worker.outcomeCounts["rejected"] ?? 0
            if rejected >= 2_600 { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(rejected == 2_600)
        // A pass after the last of them brings the rejections down to the bound (the worker keeps running).
        var kept = Int.max
        let boundDeadline = Date().addingTimeInterval(60)
        while Date() < boundDeadline {
            let stats = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) {
                try await $0.stats()
            }
            kept = stats.rejections.values.reduce(0, +)
            if kept <= 1_000 { break }
            try await Task.sleep(for: .milliseconds(500))
        }
        #expect(try await worker.terminate() == 0)

        let stats = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) {
            try await $0.stats()
        }
        kept = stats.rejections.values.reduce(0, +)
        #expect(kept <= 1_000, "the count bound holds: \(stats.rejections)")
        #expect(kept >= 900, "the newest claims are kept: \(stats.rejections)")
        #expect(stats.consumed == 300, "every purchase granted once and consumed")
        let consumes = try await simulatorConsumes(cluster.simulatorURL)
        #expect(consumes.count == 300 && consumes.values.allSatisfy { $0 == 1 }, "none lost, none consumed twice")
    }
}

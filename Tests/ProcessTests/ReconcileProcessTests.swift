import AsyncHTTPClient
import Foundation
import Fulfilment
import Gamebase
import GamebaseSimulator
import IAPTestSupport
import Kafka
import Ledger
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Testing

@testable import SystemTestSupport

/// The reconciler inside `iap-worker run`, as processes: payments made at Gamebase whose purchase messages never
/// came are found through List Consumables and granted once, through the same flow.
extension ProcessTests {
    @Suite("Reconciliation against iap-worker run", .timeLimit(.minutes(10)))
    struct Reconciliation {
        static let interval = 3_000

        static func environment(_ cluster: Cluster, ledgerURL: String, group: String, interval: Int, grace: Int)
            -> [String: String]
        {
            var environment = cluster.workerEnvironment(ledgerURL: ledgerURL, group: group)
            environment["RECONCILE_INTERVAL_MS"] = String(interval)
            environment["RECONCILE_GRACE_MS"] = String(grace)
            environment["RECONCILE_MAX_CALLS_PER_SECOND"] = "100"
            return environment
        }

        @Test func paymentsNoMessageReportedAreGrantedOnceWithinTwoIntervalsAndNothingElseIs() async throws {
            let cluster = try await Cluster.start(purchases: 6, simulatorArguments: ["--list-non-consumables"])
            // u0…u2 each paid twice but reported only p0…p2; u3 holds a subscription and u4 a test purchase that
            // no message reported either (the simulator lists subscriptions too: §6 leaves it open).
            var test = EndToEndSystem.payment("test-4", user: "u4")
            test.transaction.isTestPurchase = true
            try await cluster.addPayments(
                (0..<3).map { EndToEndSystem.payment("q\($0)", user: "u\($0)") }
                    + [EndToEndSystem.payment("sub-3", user: "u3", type: GamebaseProductType.autoRenewable), test])
            let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
            var environment = Self.environment(
                cluster, ledgerURL: ledgerURL, group: "reconcile-\(UUID().uuidString.prefix(6))",
                interval: Self.interval,
                grace: 2_000)
            environment["WORKER_REJECT_TEST_PURCHASES"] = "true"
            let worker = try cluster.worker("worker", environment)
            try await cluster.producePurchases()

            try await cluster.waitFor("the unreported payments are consumed", within: 90, workers: [worker]) {
                let consumes = try await simulatorCounters(cluster.simulatorURL).consumes
                return (0..<3).allSatisfy { consumes["q\($0)"] == 1 } && (0..<6).allSatisfy { consumes["p\($0)"] == 1 }
            }
            var counters = try await simulatorCounters(cluster.simulatorURL)
            for i in 0..<3 {
                // From the first list of the user (the pass that first saw the payment) to its Consume.
                let firstList = try #require(counters.listTimes["u\(i)"]?.first)
                let consumed = try #require(counters.consumedAt["q\(i)"])
                #expect(
                    consumed - firstList <= Int64(2 * Self.interval),
                    "q\(i) consumed \(consumed - firstList) ms after its first sighting")
            }

            // Exactly once, and said so: the ledger, the events, one log line per grant.
            try await cluster.waitFor(
                "the subscription and the test purchase are judged", within: 30, workers: [worker]
            ) {
                let stats = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) {
                    try await $0.stats()
                }
                return stats.rejections.values.reduce(0, +) == 2
            }
            let (grants, stats) = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) {
                ledger in
                (
                    try await ["q0", "q1", "q2", "sub-3", "test-4"].asyncMap { try await ledger.grant(paymentSeq: $0) },
                    try await ledger.stats()
                )
            }
            #expect(
                grants.prefix(3).allSatisfy {
                    $0?.origin == .reconciliation && $0?.state == .consumed && $0?.source == nil
                })
            #expect(
                grants[3] == nil && grants[4] == nil, "a subscription or a test purchase found this way is not granted")
            #expect(stats.consumed == 9 && stats.granted == 0)
            #expect(stats.rejections == ["not_consumable": 1, "test_purchase": 1])
            #expect(counters.consumes["sub-3"] == nil && counters.consumes["test-4"] == nil)
            let granted = try await cluster.readTopic("iap.item-granted")
            let sources = Dictionary(
                granted.map {
                    ($0.eventID ?? "?", ($0.json["data"] as? [String: Any])?["source"] as? String ?? "absent")
                }
            ) {
                "\($0),\($1)"
            }
            #expect(granted.count == 9, "one event per purchase")
            #expect(
                sources
                    == Dictionary(
                        uniqueKeysWithValues: (0..<6).map { ("p\($0):item-granted", "message") }
                            + (0..<3).map { ("q\($0):item-granted", "reconciliation") }))
            let failed = try await cluster.readTopic("iap.consume-failed")
            #expect(failed.compactMap(\.reason).sorted() == ["not_consumable", "test_purchase"])
            let lines = worker.logLines(containing: "reconciliation granted a payment no message reported")
            #expect(
                Set(lines.compactMap { $0["iap.payment_seq"] as? String }) == ["q0", "q1", "q2"] && lines.count == 3)

            // The rejections are not verified again: later passes list, and answer from the ledger.
            counters = try await simulatorCounters(cluster.simulatorURL)
            let verifications = counters.calls["payment_transaction"] ?? 0
            let lists = counters.lists["u3"] ?? 0
            try await Task.sleep(for: .milliseconds(2 * Self.interval + 500))
            counters = try await simulatorCounters(cluster.simulatorURL)
            #expect((counters.lists["u3"] ?? 0) >= lists + 2, "the passes go on")
            #expect(counters.calls["payment_transaction"] == verifications, "nothing is verified again")

            // A late message for a reconciled payment is a duplicate: nothing new is granted or published.
            try await cluster.produce([("u0", EndToEndSystem.message("q0", user: "u0"))])
            try await cluster.waitFor("the late message is handled", within: 30, workers: [worker]) {
                worker.logLines.contains {
                    $0["iap.payment_seq"] as? String == "q0" && $0["iap.outcome"] as? String == "duplicate"
                }
            }
            #expect(try await cluster.readTopic("iap.item-granted").count == 9)
            counters = try await simulatorCounters(cluster.simulatorURL)
            #expect(counters.consumes["q0"] == 1)

            let metrics = try await httpGet("http://127.0.0.1:\(try await worker.adminPort())/metrics").body
            #expect(metrics.contains(#"iap_reconciled_total{outcome="granted"} 3"#), "\(metrics)")
            #expect(metrics.contains(#"iap_reconciled_total{outcome="rejected"} 2"#))
            #expect(metrics.contains("iap_reconcile_duration_seconds_count"))
            #expect(try await worker.terminate() == 0)
        }

        @Test func threeInstancesOnPostgreSQLShareTheUsersAndNeverGrantTwice() async throws {
            let users = 24
            let interval = 4_000
            let cluster = try await Cluster.start(purchases: users, simulatorArguments: ["--latency-ms", "5"])
            try await cluster.addPayments((0..<users).map { EndToEndSystem.payment("q\($0)", user: "u\($0)") })
            let ledgerURL = try await TestDatabases.freshLedgerURL(.postgres)
            let environment = Self.environment(
                cluster, ledgerURL: ledgerURL, group: "reconcile-trio-\(UUID().uuidString.prefix(6))",
                interval: interval,
                grace: 3_000)
            var workers = try (0..<3).map { try cluster.worker("worker-\($0)", environment) }
            let started = Date()
            try await cluster.producePurchases()

            // Late messages: q12…q17 while their payments wait out the grace (the message wins), q18…q23 as the
            // reconciler starts taking payments (they race it).
            try await cluster.waitFor("every user has been listed", within: 90, workers: workers) {
                try await simulatorCounters(cluster.simulatorURL).lists.count == users
            }
            try await cluster.produce((12..<18).map { ("u\($0)", EndToEndSystem.message("q\($0)", user: "u\($0)")) })
            try await cluster.waitFor("the reconciler takes its first payment", within: 60, workers: workers) {
                let consumes = try await simulatorCounters(cluster.simulatorURL).consumes
                return (0..<12).contains { consumes["q\($0)"] != nil }
            }
            try await cluster.produce((18..<users).map { ("u\($0)", EndToEndSystem.message("q\($0)", user: "u\($0)")) })
            // An instance killed mid-way: its claimed users wait for their next interval, nothing is granted twice.
            let victim = Int.random(in: 0..<3)
            workers[victim].kill9()
            workers[victim] = try cluster.worker("worker-\(victim)-restarted", environment)

            // At Gamebase, and in the ledger: a grant whose Consume answer died with the killed instance is the
            // sweeper's after its grace (Consume again, "already consumed", recorded).
            try await cluster.waitFor("every payment is consumed", within: 150, workers: workers) {
                let consumes = try await simulatorCounters(cluster.simulatorURL).consumes
                guard (0..<users).allSatisfy({ consumes["q\($0)"] != nil && consumes["p\($0)"] != nil }) else {
                    return false
                }
                let stats = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) {
                    try await $0.stats()
                }
                return stats.consumed == 2 * users
            }
            try await Task.sleep(for: .milliseconds(interval))  // another pass of each instance
            let counters = try await simulatorCounters(cluster.simulatorURL)
            let elapsed = Date().timeIntervalSince(started)
            for worker in workers { #expect(try await worker.terminate() == 0) }

            #expect(
                counters.consumes.count == 2 * users && counters.consumes.values.allSatisfy { $0 == 1 },
                "each consumed once")
            let stats = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) {
                try await $0.stats()
            }
            #expect(stats.consumed == 2 * users && stats.granted == 0 && stats.rejections.isEmpty, "\(stats)")
            let granted = try await cluster.readTopic("iap.item-granted")
            let ids = Set(granted.compactMap(\.eventID))
            #expect(
                ids == Set((0..<users).flatMap { ["p\($0):item-granted", "q\($0):item-granted"] }),
                "one event id per purchase")
            for record in granted where (0..<12).contains(where: { record.eventID == "q\($0):item-granted" }) {
                #expect((record.json["data"] as? [String: Any])?["source"] as? String == "reconciliation")
            }

            // Each user was listed by one instance per interval: never twice within less than half an interval, and
            // no more often than the intervals that passed.
            for (user, times) in counters.listTimes {
                let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
                #expect(gaps.allSatisfy { $0 >= Int64(interval / 2) }, "\(user) listed \(gaps) ms apart")
                #expect(
                    times.count <= Int(elapsed * 1000) / interval + 1,
                    "\(user) listed \(times.count) times in \(elapsed) s")
            }
            let grantsByInstance = workers.map { $0.logLines(containing: "reconciliation granted").count }
            print("reconciliation grants by instance (a killed one not shown): \(grantsByInstance)")
        }
    }
}

extension ProcessTests.Reconciliation {
    @Test func theReconcileCommandShowsThenDoesWhatAPassWouldAndExitsLikeReprocess() async throws {
        let cluster = try await ProcessTests.Cluster.start(purchases: 2, simulatorArguments: [])
        try await cluster.addPayments([EndToEndSystem.payment("q0", user: "u0")])
        let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
        var environment = Self.environment(
            cluster, ledgerURL: ledgerURL, group: "reconcile-cmd-\(UUID().uuidString.prefix(6))", interval: 0, grace: 0)
        let worker = try cluster.worker("worker", environment)
        try await cluster.producePurchases()
        try await cluster.waitFor("p0 and p1 are consumed", within: 60, workers: [worker]) {
            try await simulatorCounters(cluster.simulatorURL).consumes.count == 2
        }
        #expect(try await worker.terminate() == 0)
        #expect(try await simulatorCounters(cluster.simulatorURL).lists.isEmpty, "interval 0: no reconciler ran")

        let dryRun = try ChildProcess(
            "reconcile-dry", ["reconcile", "--dry-run"], environment: environment, folder: cluster.folder)
        #expect(try await dryRun.exitStatus() == 0)
        #expect(
            dryRun.output.contains("dry run: nothing granted, recorded or published; 2 user(s) checked"),
            "\(dryRun.output)")
        #expect(
            dryRun.output.split(separator: "\n").contains {
                $0.contains("u0") && $0.contains("q0") && $0.contains("would_take")
            })
        #expect(try await simulatorCounters(cluster.simulatorURL).consumes["q0"] == nil)

        let pass = try ChildProcess(
            "reconcile", ["reconcile", "--user", "u0"], environment: environment, folder: cluster.folder)
        #expect(try await pass.exitStatus() == 0)
        #expect(
            pass.output.split(separator: "\n").contains { $0.contains("q0") && $0.contains("granted and consumed") })
        #expect(pass.output.contains("summary: granted 1"), "\(pass.output)")
        #expect(
            pass.output.contains("reconciliation granted a payment no message reported"),
            "the grant's log line is not filtered out: \(pass.output)")
        #expect(try await simulatorCounters(cluster.simulatorURL).consumes["q0"] == 1)
        let events = try await cluster.readTopic("iap.item-granted").filter { $0.eventID == "q0:item-granted" }
        #expect(
            events.count == 1
                && (events.first?.json["data"] as? [String: Any])?["source"] as? String == "reconciliation")

        // Kafka gone mid-pass: the grant is written, its event cannot be published; the pass ends and says so.
        try await cluster.addPayments([EndToEndSystem.payment("q1", user: "u0")])
        var noKafka = environment
        noKafka["KAFKA_BOOTSTRAP_SERVERS"] = "127.0.0.1:1"
        noKafka["KAFKA_LIBRDKAFKA_MESSAGE_TIMEOUT_MS"] = "1500"
        let cut = try ChildProcess(
            "reconcile-no-kafka", ["reconcile", "--user", "u0"], environment: noKafka, folder: cluster.folder)
        #expect(try await cut.exitStatus() == 2, "a pass the ledger or Kafka ended exits 2: \(cut.output)")
        #expect(cut.output.contains("stopped early: a ledger or Kafka call failed"), "\(cut.output)")

        environment["GAMEBASE_SECRET_KEY"] = "not-the-key"
        let refused = try ChildProcess(
            "reconcile-refused", ["reconcile"], environment: environment, folder: cluster.folder)
        #expect(try await refused.exitStatus() == 1, "a configuration Gamebase rejects exits 1, as reprocess")
        #expect(refused.output.contains("stopped early: Gamebase rejects the configuration"), "\(refused.output)")
    }
}

/// `GET /admin/counters` of a simulator process, all of it.
struct SimulatorCounters {
    var calls: [String: Int]
    var consumes: [String: Int]
    var consumedAt: [String: Int64]
    var lists: [String: Int]
    var listTimes: [String: [Int64]]
}

func simulatorCounters(_ baseURL: String) async throws -> SimulatorCounters {
    let response = try await HTTPClient.shared.execute(
        HTTPClientRequest(url: "\(baseURL)/admin/counters"), timeout: .seconds(5))
    let body = try await response.body.collect(upTo: 64 << 20)
    let object = try JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any] ?? [:]
    func int64s(_ value: Any?) -> [String: Int64] {
        (value as? [String: Any] ?? [:]).compactMapValues { ($0 as? NSNumber)?.int64Value }
    }
    return SimulatorCounters(
        calls: object["calls"] as? [String: Int] ?? [:], consumes: object["consumes"] as? [String: Int] ?? [:],
        consumedAt: int64s(object["consumedAt"]), lists: object["lists"] as? [String: Int] ?? [:],
        listTimes: (object["listTimes"] as? [String: Any] ?? [:]).compactMapValues {
            ($0 as? [NSNumber])?.map(\.int64Value)
        })
}

extension ProcessTests.Cluster {
    /// Adds payments to the simulator process (`POST /admin/payments`).
    func addPayments(_ payments: [SimulatedPayment]) async throws {
        var request = HTTPClientRequest(url: "\(simulatorURL)/admin/payments")
        request.method = .POST
        request.body = .bytes(ByteBuffer(data: try JSONEncoder().encode(payments)))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(5))
        guard response.status == .ok else { throw ProcessTestError("adding payments: \(response.status)") }
    }
}

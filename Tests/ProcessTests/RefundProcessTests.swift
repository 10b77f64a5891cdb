import Foundation
import Fulfilment
import Gamebase
import IAPTestSupport
import Kafka
import KafkaTesting
import Ledger
import Testing

@testable import SystemTestSupport

/// Refunds through the built executable, with the worker killed at random moments while it takes them in: every grant
/// is revoked exactly once, each revocation's event reaches the topic under its one id, and nothing else does.
@Suite("Refunds through iap-worker processes", .serialized, .timeLimit(.minutes(10)))
struct RefundProcessTests {
    typealias Cluster = ProcessTests.Cluster

    @Test func killedWhileTakingInRefundsNothingIsLostOrRevokedTwice() async throws {
        // One payment more at Gamebase (p60), refunded before its message comes.
        let early = 60
        let cluster = try await Cluster.start(
            purchases: 60, simulatorArguments: [],
            payments: (0...early).map { EndToEndSystem.payment("p\($0)", user: "u\($0)") })
        let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
        var environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "refund-\(UUID().uuidString.prefix(6))", maxInFlight: 16)
        environment["REFUNDS_GOOGLE_PACKAGE_NAME"] = GoogleNotifications.package
        environment["KAFKA_LIBRDKAFKA_AUTO_COMMIT_INTERVAL_MS"] = "200"
        try await cluster.producePurchases()
        let granting = try cluster.worker("worker-grants", environment)
        try await cluster.waitUntilAllConsumed(within: 120, workers: [granting], ledgerURL: ledgerURL)
        #expect(try await granting.terminate() == 0)

        // Every purchase refunded twice (a re-delivery), half of them also as the Pub/Sub message of the same
        // notification, produced while workers are killed at random moments.
        var records: [(String, String)] = []
        for i in 0..<cluster.purchases {
            let notification = GoogleNotifications.voided("GPA.p\(i)")
            records += [("n\(i)", notification), ("n\(i)", notification)]
            if i % 2 == 0 { records.append(("n\(i)", GoogleNotifications.pubSub(notification, messageId: "m\(i)"))) }
        }
        // The refund of a purchase whose message has not come yet, and records that must be refused: not JSON,
        // another package, an Apple body this worker has no Apple configuration for.
        records += [
            ("early", GoogleNotifications.voided("GPA.p\(early)")), ("x", "{not json"),
            ("x", GoogleNotifications.voided("GPA.p1", package: "com.other.game")),
            ("x", #"{"signedPayload":"a.b.c"}"#),
        ]
        let producing = Task { try await Self.produce(records, bootstrap: cluster.bootstrap) }
        var generator = SystemRandomNumberGenerator()
        var kills = 0
        for round in 0..<4 {
            let worker = try cluster.worker("worker-\(round)", environment)
            let deadline = Date().addingTimeInterval(30)
            while !worker.output.contains("store notification recorded"), worker.isRunning, Date() < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...600, using: &generator)))
            if worker.isRunning { kills += 1 }
            worker.kill9()
        }
        #expect(kills == 4, "every round killed a running worker")
        try await producing.value
        let last = try cluster.worker("worker-final", environment)
        // Up before anything is asked of it: a SIGTERM before the worker traps signals would end it by the signal.
        _ = try await last.waitForLog("reading store notifications")
        let revoked = try await Self.waitForRevocations(
            cluster.purchases, ledgerURL: ledgerURL, worker: last, within: 180)
        // The purchase refunded first comes now: a refunded rejection, never granted, never consumed at Gamebase.
        try await cluster.produce(range: early..<(early + 1))
        try await AppleRefundProcessTests.waitFor("p\(early) rejected as refunded", ledgerURL: ledgerURL, worker: last)
        {
            store in try await store.rejections(paymentSeq: "p\(early)").contains { $0.reason == "refunded" }
        }
        let status = try await last.terminate()
        #expect(status == 0, "exit status \(status):\n\(last.diagnosticOutput)")
        #expect(revoked == cluster.purchases)

        // On the topic: each grant's one event id, and no other (a kill between Kafka and the ledger may send one twice
        // under its id; the sweeper sends what a kill left unpublished).
        let events = try await Self.read("iap.item-revoked", bootstrap: cluster.bootstrap)
        #expect(Set(events) == Set((0..<cluster.purchases).map { "p\($0):item-revoked" }))
        try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) { store in
            for i in 0..<cluster.purchases {
                let notifications = try await store.notifications(
                    paymentKey: StorePaymentKey(marketId: "GG", paymentId: "GPA.p\(i)"))
                #expect(notifications.count == 1, "one notification, however often and however wrapped it came")
                #expect(notifications.first?.outcome == .revoked)
            }
            #expect(try await store.stats().unpublishedEvents == 0)
            #expect(try await store.grant(paymentSeq: "p\(early)") == nil)
            // Refused, kept once per body (each sent once here), counted; nothing revoked by them.
            let refusals = try await store.refusals(limit: 10)
            #expect(
                Set(refusals.map(\.code)) == ["malformed", "other_application", "not_configured"],
                "\(refusals.map(\.code))")
        }
        #expect(try await simulatorConsumes(cluster.simulatorURL)["p\(early)"] == nil)
        // No worker logged a purchase token (Google's notifications carry them).
        #expect(!last.output.contains("play-token-"), "a purchase token in the log")
    }

    /// Google's quantity-based partial refunds through the built executable: two partial refunds and then a whole one
    /// of a granted purchase revoke three times (the partial ones `partial: true`, the whole one the rest), and a partial
    /// refund read before its purchase lets the purchase be granted, its partial revocation following. Before, the first
    /// partial refund spent the grant's only revocation (the others `already_refunded`), and one before the purchase
    /// made it a `refunded` rejection.
    @Test func partialRefundsRevokeTheirUnitsBeforeAndAfterTheGrant() async throws {
        let cluster = try await Cluster.start(
            purchases: 2, simulatorArguments: [],
            payments: (0..<2).map { EndToEndSystem.payment("p\($0)", user: "u\($0)") })
        let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
        var environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "partial-\(UUID().uuidString.prefix(6))")
        environment["REFUNDS_GOOGLE_PACKAGE_NAME"] = GoogleNotifications.package
        try await cluster.produce(range: 0..<1)
        let worker = try cluster.worker("worker", environment)
        try await AppleRefundProcessTests.waitFor("p0 granted", ledgerURL: ledgerURL, worker: worker) { store in
            try await store.grant(paymentSeq: "p0")?.state == .consumed
        }
        let time: Int64 = 1_764_000_000_000
        try await Self.produce(
            [
                ("n", GoogleNotifications.voided("GPA.p0", time: time, refundType: 2)),
                ("n", GoogleNotifications.voided("GPA.p0", time: time + 1_000, refundType: 2)),
                ("n", GoogleNotifications.voided("GPA.p0", time: time + 2_000)),
                ("n", GoogleNotifications.voided("GPA.p1", time: time, refundType: 2)),
            ], bootstrap: cluster.bootstrap)
        try await AppleRefundProcessTests.waitFor("the refunds recorded", ledgerURL: ledgerURL, worker: worker) {
            store in
            let p1 = try await store.notifications(paymentKey: StorePaymentKey(marketId: "GG", paymentId: "GPA.p1"))
            return try await store.revocations(paymentSeq: "p0").count == 3 && p1.first?.outcome == .pendingPartial
        }
        try await cluster.produce(range: 1..<2)
        try await AppleRefundProcessTests.waitFor(
            "p1 granted, then partly revoked", ledgerURL: ledgerURL, worker: worker
        ) { store in
            let grant = try await store.grant(paymentSeq: "p1")
            let revocations = try await store.revocations(paymentSeq: "p1")
            let unpublished = try await store.stats().unpublishedEvents
            return grant?.state == .consumed && revocations.count == 1 && unpublished == 0
        }
        let (p0, p1) = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) { store in
            (try await store.revocations(paymentSeq: "p0"), try await store.revocations(paymentSeq: "p1"))
        }
        #expect(p0.map(\.isPartial) == [true, true, false])
        #expect(p1.map(\.isPartial) == [true])
        #expect(try await worker.terminate() == 0)
        let events = try await Self.messages("iap.item-revoked", bootstrap: cluster.bootstrap)
        let partial = Dictionary(
            events.map { ($0.eventID ?? "-", (($0.json["data"] as? [String: Any])?["partial"] as? Bool) ?? false) },
            uniquingKeysWith: { $1 })
        #expect(
            partial == [
                "p0:item-revoked": true, "p0:item-revoked:2": true, "p0:item-revoked:3": false, "p1:item-revoked": true,
            ])
        #expect(!worker.output.contains("play-token-"), "a purchase token in the log")
    }

    /// A grant a refund revoked whose Consume Gamebase refuses for good (5000, a payment in an abnormal state), through
    /// the built executable: the sweeper tries it once after the refund, sets it aside, and stops; the unconsumed-grant
    /// gauges leave it out, `iap_set_aside_grants` counts it and `find` says so. Before, it was retried every sweep
    /// for ever and kept IAPWorkerGrantsAwaitingConsume firing.
    @Test func aRevokedGrantGamebaseWillNotConsumeIsSetAsideNotRetriedForEver() async throws {
        let cluster = try await Cluster.start(
            purchases: 1, simulatorArguments: [], payments: [EndToEndSystem.payment("p0", user: "u0")])
        try await setSimulatorFaults(
            cluster.simulatorURL, #"{"consumeResultCodes":{"p0":\#(GamebaseResultCode.consumeFailed.rawValue)}}"#)
        let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
        var environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "set-aside-\(UUID().uuidString.prefix(6))")
        environment["REFUNDS_GOOGLE_PACKAGE_NAME"] = GoogleNotifications.package
        try await cluster.producePurchases()
        let worker = try cluster.worker("worker", environment)
        try await AppleRefundProcessTests.waitFor("p0 granted, Consume refused", ledgerURL: ledgerURL, worker: worker) {
            store in
            let grant = try await store.grant(paymentSeq: "p0")
            return grant?.state == .granted && (grant?.consumeAttempts ?? 0) >= 1
        }
        try await Self.produce([("n", GoogleNotifications.voided("GPA.p0"))], bootstrap: cluster.bootstrap)
        // The sweeper takes grants older than 30 s, every 10 s.
        try await AppleRefundProcessTests.waitFor(
            "p0 revoked and set aside", ledgerURL: ledgerURL, worker: worker, within: 90
        ) { store in
            let revoked = try await store.revocation(paymentSeq: "p0") != nil
            let setAside = try await store.history(paymentSeq: "p0").consumeSetAsideAt != nil
            return revoked && setAside
        }
        let attempts = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) {
            try await $0.grant(paymentSeq: "p0")?.consumeAttempts ?? 0
        }
        // Two more sweeps: no further Consume.
        try await Task.sleep(for: .seconds(25))
        let (grant, setAside) = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) {
            (try await $0.grant(paymentSeq: "p0"), try await $0.countSetAside())
        }
        #expect(grant?.state == .granted && grant?.consumeAttempts == attempts, "no Consume after it was set aside")
        #expect(setAside == 1)
        let metrics = try await httpGet("http://127.0.0.1:\(try await worker.adminPort())/metrics").body
        #expect(metrics.contains("iap_set_aside_grants 1"), "\(metrics)")
        #expect(metrics.contains("iap_unconsumed_grants 0"), "\(metrics)")
        #expect(metrics.contains("iap_oldest_unconsumed_grant_age_seconds 0"), "\(metrics)")
        #expect(worker.logLines(containing: "set aside, not retried").count == 1)
        #expect(try await worker.terminate() == 0)

        let find = try ChildProcess("find", ["find", "--url", ledgerURL, "p0"], folder: cluster.folder)
        #expect(try await find.exitStatus(within: 60) == 0)
        #expect(find.output.contains("Consume set aside"), "\(find.output)")
        #expect(!find.output.contains("play-token-") && !worker.output.contains("play-token-"), "a purchase token")
    }

    static func produce(_ records: [(String, String)], bootstrap: String) async throws {
        let producer = try KafkaProducer(
            configuration: .init(bootstrapServers: bootstrap, properties: ["linger.ms": "5"]),
            logger: EndToEndSystem.logger)
        for (index, record) in records.enumerated() {
            _ = try await producer.send(
                KafkaProducerRecord(
                    topic: "store.notifications", key: Array(record.0.utf8), value: Array(record.1.utf8)))
            if index % 20 == 19 { try await Task.sleep(for: .milliseconds(100)) }
        }
        await producer.close()
    }

    /// Waits until the ledger holds `count` revocations, all their events published; answers how many it holds.
    static func waitForRevocations(_ count: Int, ledgerURL: String, worker: ChildProcess, within seconds: Double)
        async throws -> Int
    {
        let deadline = Date().addingTimeInterval(seconds)
        var revoked = 0
        while Date() < deadline {
            guard worker.isRunning else { throw ProcessTestError("\(worker.name) exited:\n\(worker.diagnosticOutput)") }
            let (found, unpublished) = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) {
                store in
                var found = 0
                for i in 0..<count where try await store.revocation(paymentSeq: "p\(i)") != nil { found += 1 }
                return (found, try await store.stats().unpublishedEvents)
            }
            revoked = found
            if found == count, unpublished == 0 { return found }
            try await Task.sleep(for: .milliseconds(250))
        }
        throw ProcessTestError(
            "\(revoked) of \(count) grants revoked within \(seconds) s\n\(worker.diagnosticOutput)")
    }

    /// The event ids on `topic` (reads until quiet).
    static func read(_ topic: String, bootstrap: String) async throws -> [String] {
        try await messages(topic, bootstrap: bootstrap).map { $0.eventID ?? "-" }
    }

    /// The records on `topic` (reads until quiet).
    static func messages(_ topic: String, bootstrap: String) async throws -> [KafkaMessage] {
        try await KafkaConsumer.readWhole(topic: topic, bootstrapServers: bootstrap, logger: EndToEndSystem.logger)
    }
}

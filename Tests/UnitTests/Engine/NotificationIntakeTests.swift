import Engine
import Foundation
import Fulfilment
import IAPTestSupport
import InMemoryLedger
import Logging
import ServiceLifecycle
import Stores
import Synchronization
import Testing

/// The store-notifications intake on a memory topic and ledger: each record taken in once and its offset stored after,
/// refusals kept and counted, a failing ledger waited out without skipping the record.
@Suite("Store-notification intake", .timeLimit(.minutes(1)))
struct NotificationIntakeTests {
    static let topic = "store.notifications"
    static let partition = SourcePartition(topic, 0)
    static let package = "com.studio.game"

    static func voided(orderId: String, package: String = package, time: Int64 = 1_764_000_000_123) -> [UInt8] {
        Array(
            """
            {"version":"1.0","packageName":"\(package)","eventTimeMillis":"\(time)",
             "voidedPurchaseNotification":{"purchaseToken":"secret-token-\(orderId)","orderId":"\(orderId)",
             "productType":2,"refundType":1}}
            """.utf8)
    }

    /// A ledger whose refunds role fails the first `failures` records.
    final class FailingRefunds: RefundLedger {
        let base: MemoryLedger
        let failures: Mutex<Int>
        init(_ base: MemoryLedger, failures: Int) {
            self.base = base
            self.failures = Mutex(failures)
        }
        struct Down: Error {}
        func record(_ record: StoreNotificationRecord, events: EventFactory, now: Date) async throws -> RefundRecording
        {
            if failures.withLock({ left in
                defer { left -= 1 }
                return left > 0
            }) {
                throw Down()
            }
            return try await base.record(record, events: events, now: now)
        }
        func notifications(paymentKey: StorePaymentKey) async throws -> [StoreNotificationRecord] {
            try await base.notifications(paymentKey: paymentKey)
        }
        func notification(id: String) async throws -> StoreNotificationRecord? { try await base.notification(id: id) }
        func revocations(paymentSeq: String) async throws -> [RevocationRecord] {
            try await base.revocations(paymentSeq: paymentSeq)
        }
        func latestRefunds(limit: Int) async throws -> [RefundListing] { try await base.latestRefunds(limit: limit) }
        func refundCounts(since: Date) async throws -> [RefundDayCount] { try await base.refundCounts(since: since) }
        func refundingUsers(since: Date, limit: Int) async throws -> [RefundingUser] {
            try await base.refundingUsers(since: since, limit: limit)
        }
        func recordRefusal(_ refusal: RefusedNotification) async throws { try await base.recordRefusal(refusal) }
        func refusals(limit: Int) async throws -> [RefusedNotification] { try await base.refusals(limit: limit) }
        func refusals(claimedId: String, limit: Int) async throws -> [RefusedNotification] {
            try await base.refusals(claimedId: claimedId, limit: limit)
        }
        func claimHistoryPoll(name: String, owner: String, until: Date, now: Date) async throws -> HistoryPollMark? {
            try await base.claimHistoryPoll(name: name, owner: owner, until: until, now: now)
        }
        func saveHistoryPoll(_ mark: HistoryPollMark, owner: String, leaseUntil: Date?) async throws -> Bool {
            try await base.saveHistoryPoll(mark, owner: owner, leaseUntil: leaseUntil)
        }
        func historyPolls() async throws -> [HistoryPollMark] { try await base.historyPolls() }
        func settlePendingRefunds(limit: Int, events: EventFactory, now: Date) async throws -> [RefundRecording] {
            try await base.settlePendingRefunds(limit: limit, events: events, now: now)
        }
        func claimConsumptionRequests(now: Date, until: Date, limit: Int) async throws -> [ConsumptionRequest] {
            try await base.claimConsumptionRequests(now: now, until: until, limit: limit)
        }
        func recordConsumptionAnswer(_ answer: ConsumptionAnswer, claim request: ConsumptionRequest) async throws
            -> Bool
        {
            try await base.recordConsumptionAnswer(answer, claim: request)
        }
        func nearestConsumptionDeadline(now: Date) async throws -> Date? {
            try await base.nearestConsumptionDeadline(now: now)
        }
        func consumptionAnswer(notificationId: String) async throws -> ConsumptionAnswer? {
            try await base.consumptionAnswer(notificationId: notificationId)
        }
        func grant(paymentKey: StorePaymentKey) async throws -> GrantRecord? {
            try await base.grant(paymentKey: paymentKey)
        }
    }

    struct Rig {
        let source = MemoryPurchaseSource()
        let ledger = MemoryLedger()
        let publisher = RecordingPublisher()
        let metrics = RecordingMetrics()
        let health = WorkerHealth()
        let clock = TestClock()
        let intake: NotificationIntake

        init(failures: Int = 0) {
            var logger = Logger(label: "intake.test")
            logger.logLevel = .critical
            let events = EventFactory(groupID: "g", itemGrantedTopic: "granted", consumeFailedTopic: "failed")
            let refunds: any RefundLedger = failures > 0 ? FailingRefunds(ledger, failures: failures) : ledger
            intake = NotificationIntake(
                source: source,
                reader: StoreNotificationReader(googlePackageName: NotificationIntakeTests.package, apple: nil),
                recorder: RefundRecorder(
                    refunds: refunds, purchases: ledger, publisher: publisher, events: events, clock: clock,
                    logger: logger),
                configuration: NotificationIntake.Configuration(topic: NotificationIntakeTests.topic), metrics: metrics,
                health: health, clock: clock, logger: logger)
        }

        func grant(_ seq: String) async throws {
            let grant = GrantRecord(
                paymentSeq: seq, userId: "player-\(seq)", gamebaseProductId: "gems", purchaseToken: "tok-\(seq)",
                marketId: "GG", price: "4.99", currency: "USD", paymentId: "GPA.\(seq)", grantedAt: clock.now)
            _ = try await ledger.insertGrant(
                grant,
                event: EventFactory(groupID: "g", itemGrantedTopic: "granted", consumeFailedTopic: "failed")
                    .itemGranted(grant))
        }

        /// Runs the intake until `condition` holds, then stops it.
        func run(until what: String, _ condition: @escaping @Sendable () async throws -> Bool) async throws {
            let task = Task { try await intake.run() }
            try await waitUntil("the intake starts", within: .seconds(10), every: .milliseconds(2)) { source.isStarted }
            source.assign([NotificationIntakeTests.partition])
            try await waitUntil(what, within: .seconds(20), every: .milliseconds(5), condition)
            source.initiateClose()
            task.cancel()
            _ = try? await task.value
        }
    }

    /// A fatal error of the topic's consumer stops the intake until a restart while purchases go on: said in
    /// readiness's detail (which stays ready), in `iap_service_stopped{service}` and its alert. Before, only a log line.
    @Test func anIntakeWhoseSourceFailsSaysSoInReadinessAndAMetric() async throws {
        struct Fatal: Error, CustomStringConvertible { var description: String { "broker says: fatal" } }
        let rig = Rig()
        rig.health.markSubscribed()
        let task = Task { try await rig.intake.run() }
        try await waitUntil("the intake starts", within: .seconds(10), every: .milliseconds(2)) { rig.source.isStarted }
        #expect(rig.metrics.values.servicesStopped[NotificationIntake.serviceName] == false)
        rig.source.failNextBatch(with: Fatal())
        try await waitUntil("the intake says it stopped", within: .seconds(10), every: .milliseconds(2)) {
            rig.metrics.values.servicesStopped[NotificationIntake.serviceName] == true
        }
        let ready = rig.health.ready
        #expect(ready.ok, "purchases are not held up by it")
        #expect(
            ready.detail == "ok; store_notifications_intake stopped: the source failed: broker says: fatal", "\(ready)")
        task.cancel()
        _ = try? await task.value
    }

    @Test func aRefundIsTakenInOnceAndItsOffsetStoredAfter() async throws {
        let rig = Rig()
        try await rig.grant("500")
        rig.source.append(Self.voided(orderId: "GPA.500"), to: Self.partition)
        rig.source.append(Self.voided(orderId: "GPA.500"), to: Self.partition)
        rig.source.append(Self.voided(orderId: "GPA.unknown"), to: Self.partition)
        try await rig.run(until: "three records are taken in") { rig.source.storedOffsets[Self.partition] == 3 }

        #expect(rig.publisher.records(on: "iap.item-revoked").map(\.value).count == 1)
        #expect(try await rig.ledger.revocation(paymentSeq: "500")?.userId == "player-500")
        #expect(
            rig.metrics.values.storeNotifications == [
                "google/refund/revoked": 1, "google/refund/duplicate": 1, "google/refund/pending": 1,
            ])
        #expect(rig.metrics.values.revocations == ["google/refund": 1])
        #expect(try await rig.ledger.refusals(limit: 10).isEmpty)
    }

    @Test func refusedRecordsAreKeptCountedAndRevokeNothing() async throws {
        let rig = Rig()
        try await rig.grant("600")
        let hostile: [[UInt8]] = [
            Self.voided(orderId: "GPA.600", package: "com.other.game"),
            Array("not json at all".utf8),
            Array(#"{"signedPayload":"eyJhbGciOiJub25lIn0.e30."}"#.utf8),
            [0xff, 0xfe, 0x00],
            Array(repeating: UInt8(ascii: "["), count: 100_000),
            Self.voided(orderId: "GPA.600", package: "com.other.game"),
        ]
        for value in hostile { rig.source.append(value, to: Self.partition) }
        try await rig.run(until: "every record is taken in") {
            rig.source.storedOffsets[Self.partition] == Int64(hostile.count)
        }

        #expect(rig.publisher.records.isEmpty)
        #expect(try await rig.ledger.revocation(paymentSeq: "600") == nil)
        let refusals = try await rig.ledger.refusals(limit: 10)
        #expect(refusals.count == 5)
        #expect(refusals.map(\.count).sorted() == [1, 1, 1, 1, 2])
        #expect(Set(refusals.map(\.code)) == ["other_application", "malformed", "not_configured"])
        for refusal in refusals {
            #expect(!refusal.detail.contains("secret-token"), "a refusal never keeps the token")
        }
        // Where each came from, to read it again: the record the same body came last in.
        let sources = Set(refusals.compactMap(\.source))
        #expect(sources.count == 5, "\(sources)")
        let repeated = try #require(refusals.first { $0.count == 2 })
        #expect(repeated.source == "\(Self.partition.topic)[\(Self.partition.partition)]@\(hostile.count - 1)")
        let counted = rig.metrics.values.storeNotifications
        #expect(counted["google/unknown/refused_other_application"] == 2)
        #expect(counted["apple/unknown/refused_not_configured"] == 1)
        #expect(counted.values.reduce(0, +) == hostile.count)
    }

    @Test func aFailingLedgerIsWaitedOutAndTheRecordNeverSkipped() async throws {
        let rig = Rig(failures: 3)
        try await rig.grant("700")
        rig.source.append(Self.voided(orderId: "GPA.700"), to: Self.partition)
        let task = Task { try await rig.intake.run() }
        try await waitUntil("the intake starts", within: .seconds(10), every: .milliseconds(2)) { rig.source.isStarted }
        rig.source.assign([Self.partition])
        for _ in 0..<3 {
            try await rig.clock.sleepers(atLeast: 1)
            #expect(rig.source.storedOffsets[Self.partition] == nil, "not stored while the ledger fails")
            rig.clock.advance(by: .seconds(60))
        }
        try await waitUntil("the record is taken in", within: .seconds(20), every: .milliseconds(5)) {
            rig.source.storedOffsets[Self.partition] == 1
        }
        #expect(rig.publisher.records(on: "iap.item-revoked").count == 1)
        rig.source.initiateClose()
        task.cancel()
        _ = try? await task.value
    }
}

import Foundation
import Fulfilment
import Gamebase
import IAPTestSupport
import Synchronization
import Testing

@testable import Engine
@testable import InMemoryLedger

/// The sweeper with refunds: a topic that refuses its events (a missing item-revoked topic) holds back nothing else,
/// and a refund left pending beside a grant of its payment (an instance of an older version granted it) is revoked.
@Suite("The sweeper and refunds", .timeLimit(.minutes(1)))
struct RefundSweepTests {
    @Test func aTopicThatRefusesItsEventsHoldsBackNeitherOtherTopicsNorConsume() async throws {
        let harness = EngineHarness(sweep: .init(grace: .zero))
        // An older event on a topic that refuses everything, then an unfinished grant.
        _ = try await harness.ledger.insertRejection(
            RejectionRecord(
                key: RejectionKey(paymentSeq: "r0", userId: "u", tokenHash: "h"), reason: "invalid_purchase",
                eventID: "r0:revoked-elsewhere", rejectedAt: harness.clock.now.addingTimeInterval(-60)),
            event: OutboxEvent(
                id: "r0:revoked-elsewhere", paymentSeq: "r0", topic: "iap.item-revoked", key: nil, headers: [],
                payload: Array("{}".utf8), createdAt: harness.clock.now.addingTimeInterval(-60)))
        try await harness.unfinishedGrant("s1")
        harness.publisher.state.withLock { $0.refusedTopics = ["iap.item-revoked"] }
        harness.clock.advance(by: .seconds(1))

        let result = await harness.services.sweeper.sweepOnce()
        #expect(result.unpublishable == 1)
        #expect(result.published == 1, "the item-granted event still goes out")
        #expect(result.consumed == 1, "and the grant is still consumed")
        #expect(try await harness.ledger.event(id: "r0:revoked-elsewhere")?.publishedAt == nil)
    }

    @Test func aRefundPendingBesideAGrantIsRevokedByTheSweeperAfterTheGrantsOwnEvent() async throws {
        let harness = EngineHarness(sweep: .init(grace: .seconds(30)))
        let refund = StoreNotification(
            store: .google, kind: .refund, storeType: "voidedPurchaseNotification", notificationId: "late-1",
            authenticity: .trustedChannel, paymentId: "GPA.s2", application: "com.studio.game",
            occurredAt: harness.clock.now)
        #expect(try await harness.services.refunds.record(refund, channel: .googleRTDN).outcome == .pending)
        // An instance of a version before refunds grants the payment anyway: no look at pending refunds.
        try await harness.unfinishedGrant("other")
        harness.ledger.state.withLock { state in
            var row = state.grants.removeValue(forKey: BinaryText("other"))!
            row.record.paymentSeq = "s2"
            row.record.paymentId = "GPA.s2"
            state.grants[BinaryText("s2")] = row
            var event = state.outbox.removeValue(forKey: BinaryText("other:item-granted"))!
            event.event.id = "s2:item-granted"
            event.event.paymentSeq = "s2"
            state.outbox[BinaryText("s2:item-granted")] = event
        }

        let result = await harness.services.sweeper.sweepOnce()
        #expect(result.settledRefunds == 1)
        #expect(try await harness.ledger.revocation(paymentSeq: "s2")?.notificationId == "late-1")
        #expect(try await harness.ledger.notification(id: "late-1")?.outcome == .revoked)
        #expect(
            harness.publisher.records.map(\.topic) == ["iap.item-granted", "iap.item-revoked"],
            "the grant's own event goes out first, though its grace has not passed")
        #expect(await harness.services.sweeper.sweepOnce().settledRefunds == 0, "settled once")
    }

    /// A crash (here: the topic refusing) between a refund's transaction and its event leaves the item-revoked event
    /// unpublished; the reversal that follows publishes it first, so a game never hears of a reversal before the
    /// revocation it undoes.
    @Test func aRevocationLeftUnpublishedGoesOutBeforeTheReversalThatFollowsIt() async throws {
        let harness = EngineHarness(sweep: .init(grace: .seconds(30)))
        try await harness.unfinishedGrant("s3")
        func notification(_ id: String, _ kind: StoreNotification.Kind, after seconds: Double) -> StoreNotification {
            Self.google(id, kind, payment: "GPA.s3", at: harness.clock.now.addingTimeInterval(seconds))
        }
        harness.publisher.state.withLock { $0.refusedTopics = ["iap.item-revoked"] }
        await #expect(throws: (any Error).self) {
            try await harness.services.refunds.record(notification("r", .refund, after: 1), channel: .googleRTDN)
        }
        harness.publisher.state.withLock { $0.refusedTopics = [] }
        let reversal = try await harness.services.refunds.record(
            notification("v", .refundReversed, after: 2), channel: .googleRTDN)
        #expect(reversal.outcome == .reversed)
        let revocations = harness.publisher.records.filter { $0.topic == "iap.item-revoked" }.map { record in
            (try? JSONSerialization.jsonObject(with: Data(record.value)) as? [String: Any])?["id"] as? String ?? "-"
        }
        #expect(revocations == ["s3:item-revoked", "s3:refund-reversed"], "\(revocations)")
        #expect(harness.publisher.records.first?.topic == "iap.item-granted")
    }

    /// A partial refund read before its purchase is settled by the sweeper once the purchase is granted, and its
    /// revocation is counted like any other.
    @Test func aPartialRefundSettledByTheSweeperIsCounted() async throws {
        let harness = EngineHarness(sweep: .init(grace: .zero))
        let partial = StoreNotification(
            store: .google, kind: .refund, storeType: "voidedPurchaseNotification", notificationId: "part-1",
            authenticity: .trustedChannel, paymentId: "GPA.s4", application: "com.studio.game",
            reason: RevocationRecord.googlePartialRefund, occurredAt: harness.clock.now)
        #expect(try await harness.services.refunds.record(partial, channel: .googleRTDN).outcome == .pendingPartial)
        try await harness.unfinishedGrant("s4")
        harness.clock.advance(by: .seconds(1))
        let result = await harness.services.sweeper.sweepOnce()
        #expect(result.settledRefunds == 1)
        #expect(try await harness.ledger.revocation(paymentSeq: "s4")?.isPartial == true)
        #expect(harness.metrics.values.revocations == ["google/partial_refund": 1])
    }

    /// Two recordings of one grant committed before either publishes (the poller's refund, the topic's reversal, on two
    /// instances): the refund's publishing stops at its own event and leaves the reversal to its recording, so the
    /// reversal never goes out before the revocation it undoes.
    @Test func aRecordingPublishesNothingWrittenAfterIt() async throws {
        let harness = EngineHarness(sweep: .init(grace: .seconds(30)))
        try await harness.unfinishedGrant("s5")
        func notification(_ id: String, _ kind: StoreNotification.Kind, after seconds: Double) -> StoreNotification {
            Self.google(id, kind, payment: "GPA.s5", at: harness.clock.now.addingTimeInterval(seconds))
        }
        let recorder = harness.services.refunds
        let refund = try await recorder.store(notification("r", .refund, after: 1), channel: .googleRTDN)
        let reversal = try await recorder.store(notification("v", .refundReversed, after: 2), channel: .googleRTDN)
        try await recorder.publishEvents(of: refund)
        func revocationIDs() -> [String] {
            harness.publisher.records.filter { $0.topic == "iap.item-revoked" }.map { record in
                (try? JSONSerialization.jsonObject(with: Data(record.value)) as? [String: Any])?["id"] as? String ?? "-"
            }
        }
        #expect(revocationIDs() == ["s5:item-revoked"])
        try await recorder.publishEvents(of: reversal)
        #expect(revocationIDs() == ["s5:item-revoked", "s5:refund-reversed"])
    }

    /// A grant a refund revoked, whose Consume Gamebase refuses for good (5000, a payment in an abnormal state), is set
    /// aside after one refusal: the sweeper no longer retries it nor counts it as unconsumed (the alert on unconsumed
    /// grants would otherwise fire for ever), counts it apart, and tries it again once the refund is reversed.
    @Test func aRevokedGrantGamebaseWillNotConsumeIsSetAsideUntilItsRefundIsReversed() async throws {
        let harness = EngineHarness(sweep: .init(grace: .zero))
        try await harness.unfinishedGrant("s6")
        try await harness.unfinishedGrant("s7")
        _ = try await harness.services.refunds.record(
            Self.google("r6", .refund, payment: "GPA.s6", at: harness.clock.now), channel: .googleRTDN)
        harness.gamebase.failConsume(Array(repeating: FakeGamebase.error(.consumeFailed, api: "consume"), count: 100))
        harness.clock.advance(by: .seconds(1))

        let first = await harness.services.sweeper.sweepOnce()
        #expect(first.setAside == 1, "the revoked grant")
        #expect(first.stillPending == 1, "the other one, not revoked, is retried as before")
        #expect(harness.metrics.values.setAsideGrants == 1)
        #expect(harness.metrics.values.unconsumedGrants == 1)
        let calls = harness.gamebase.consumeCalls
        harness.clock.advance(by: .seconds(600))
        let second = await harness.services.sweeper.sweepOnce()
        #expect(second.setAside == 0 && second.stillPending == 1)
        #expect(harness.gamebase.consumeCalls == calls + 1, "only the grant that is not revoked is tried again")
        let history = try await harness.ledger.history(paymentSeq: "s6")
        #expect(history.consumeSetAsideAt != nil)

        // Reversed: the item is the player's again; Consume is tried again (and now taken).
        harness.gamebase.failConsume([])
        _ = try await harness.services.refunds.record(
            Self.google("v6", .refundReversed, payment: "GPA.s6", at: harness.clock.now), channel: .googleRTDN)
        harness.clock.advance(by: .seconds(600))
        let third = await harness.services.sweeper.sweepOnce()
        #expect(third.consumed == 2 && third.setAside == 0)
        #expect(harness.metrics.values.setAsideGrants == 0)
        #expect(try await harness.ledger.grant(paymentSeq: "s6")?.state == .consumed)
    }

    /// A Google notification of `payment`, `kind`, at `date`.
    static func google(_ id: String, _ kind: StoreNotification.Kind, payment: String, at date: Date)
        -> StoreNotification
    {
        StoreNotification(
            store: .google, kind: kind, storeType: "voidedPurchaseNotification", notificationId: id,
            authenticity: .trustedChannel, paymentId: payment, application: "com.studio.game", occurredAt: date)
    }
}

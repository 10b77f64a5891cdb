import Foundation
import Fulfilment
import Gamebase
import IAPTestSupport
import Logging
import Testing

/// The flow with the stores' refunds: a refund recorded before the purchase makes it a `refunded` rejection (no grant,
/// no Consume); a refund after the grant publishes one item-revoked event, however often it comes.
@Suite("Refunds in the consume flow")
struct RefundFlowTests {
    static func refund(_ id: String, paymentId: String, kind: StoreNotification.Kind = .refund) -> StoreNotification {
        StoreNotification(
            store: .google, kind: kind, storeType: "voidedPurchaseNotification", notificationId: id,
            authenticity: .trustedChannel, paymentId: paymentId, purchaseTokenHash: "hash",
            application: "com.example.game", reason: "REFUND_TYPE_FULL_REFUND",
            occurredAt: Date(timeIntervalSince1970: 1_763_990_000))
    }

    static func recorder(_ h: FlowHarness, _ ledger: any TestLedger) -> RefundRecorder {
        var logger = Logger(label: "refund.test")
        logger.logLevel = .critical
        return RefundRecorder(
            refunds: ledger, purchases: ledger, publisher: h.publisher, events: h.processor.configuration.events,
            logger: logger)
    }

    @Test(arguments: LedgerBackend.allCases)
    func aPurchaseRefundedBeforeItsMessageIsRejectedAndNeverConsumed(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend, maxConnections: 30) { ledger in
            let h = FlowHarness(ledger: ledger)
            h.payment("3001")
            let recording = try await Self.recorder(h, ledger).record(
                Self.refund("early", paymentId: "GPA.3001"), channel: .googleRTDN)
            #expect(recording.outcome == .pending)

            #expect(try await h.process("3001") == .rejected(paymentSeq: "3001", reason: .refunded))
            #expect(try await ledger.grant(paymentSeq: "3001") == nil)
            #expect(h.gamebase.consumeCalls == 0)
            #expect(h.publisher.events(on: h.topics.granted).isEmpty)
            let failed = try #require(h.publisher.events(on: h.topics.failed).first)
            let data = try #require(failed["data"] as? [String: Any])
            #expect(data["reason"] as? String == "refunded")
            #expect(data["retryable"] as? Bool == false)
            #expect((data["detail"] as? String)?.contains("early") == true)
            // The message again is a duplicate of its rejection.
            #expect(try await h.process("3001", offset: 5) == .duplicate(paymentSeq: "3001"))
            #expect(h.gamebase.consumeCalls == 0)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aRefundAfterTheGrantPublishesOneItemRevokedEvent(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend, maxConnections: 30) { ledger in
            let h = FlowHarness(ledger: ledger)
            h.payment("3002")
            #expect(try await h.process("3002") == .granted(paymentSeq: "3002", consumePending: false))
            let recorder = Self.recorder(h, ledger)
            for _ in 0..<3 {
                _ = try await recorder.record(Self.refund("late", paymentId: "GPA.3002"), channel: .googleRTDN)
            }
            _ = try await recorder.record(Self.refund("late-again", paymentId: "GPA.3002"), channel: .googleRTDN)

            let revoked = h.publisher.events(on: "iap.item-revoked")
            #expect(revoked.count == 1)
            let event = try #require(revoked.first)
            #expect(event["id"] as? String == "3002:item-revoked")
            #expect(event["type"] as? String == "gamebase.iap.item.revoked.v1")
            #expect(event["subject"] as? String == "3002")
            let data = try #require(event["data"] as? [String: Any])
            #expect(data["userId"] as? String == "owner")
            #expect(data["paymentSeq"] as? String == "3002")
            #expect(data["gamebaseProductId"] as? String == "gem_pack_100")
            #expect(data["paymentId"] as? String == "GPA.3002")
            #expect((data["price"] as? NSNumber)?.doubleValue == 1200.5)
            #expect(data["currency"] as? String == "KRW")
            #expect(data["store"] as? String == "google")
            #expect(data["reason"] as? String == "refund")
            #expect(data["storeReason"] as? String == "REFUND_TYPE_FULL_REFUND")
            #expect(data["revokedAt"] as? String == "2025-11-24T13:13:20.000Z")
            #expect(data["notificationId"] as? String == "late")
            #expect(data["source"] as? String == "google-rtdn")
            // Published and marked so: the sweeper has nothing to send again.
            #expect(try await ledger.event(id: "3002:item-revoked")?.publishedAt != nil)

            _ = try await recorder.record(
                Self.refund("back", paymentId: "GPA.3002", kind: .refundReversed), channel: .googleRTDN)
            let reversed = h.publisher.events(on: "iap.item-revoked").filter {
                $0["type"] as? String == "gamebase.iap.refund.reversed.v1"
            }
            #expect(reversed.map { $0["id"] as? String } == ["3002:refund-reversed"])
        }
    }

    /// A refund undone before its purchase was granted gives the purchase back: the `refunded` rejection goes with the
    /// refund, so the message sent again is judged afresh and granted.
    @Test(arguments: LedgerBackend.allCases)
    func aRefundReversedAfterItsPurchaseWasRefusedLetsThePurchaseBeGranted(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend, maxConnections: 30) { ledger in
            let h = FlowHarness(ledger: ledger)
            h.payment("3003")
            let recorder = Self.recorder(h, ledger)
            _ = try await recorder.record(Self.refund("first", paymentId: "GPA.3003"), channel: .googleRTDN)
            #expect(try await h.process("3003") == .rejected(paymentSeq: "3003", reason: .refunded))
            let reversal = try await recorder.record(
                Self.refund("undone", paymentId: "GPA.3003", kind: .refundReversed), channel: .googleRTDN)
            #expect(reversal.outcome == .reversed)
            #expect(try await h.process("3003", offset: 7) == .granted(paymentSeq: "3003", consumePending: false))
            #expect(h.gamebase.successfulConsumes("3003") == 1)
        }
    }
}

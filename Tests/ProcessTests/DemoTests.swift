import Fulfilment
import Sandbox
import Testing

@testable import SystemTestSupport

@Suite("iap-dev demo", .timeLimit(.minutes(3)))
struct DemoTests {
    @Test func theDemoGrantsEveryValidPurchaseOnceAndReportsEveryOtherKind() async throws {
        let report = try await Demo.run(
            Demo.Options(purchases: 30, port: 0), logger: EndToEndSystem.logger, say: { _ in })
        #expect(report.invariantsHold)
        #expect(report.outcomes["granted"] == 31)
        #expect(report.outcomes["malformed"] == 4)
        #expect(report.deadLetterReasons == ["malformed_message": 4])
        let reasons = report.consumeFailedReasons
        #expect(reasons["malformed_message"] == 4)
        #expect(reasons["user_mismatch"] == 1)
        #expect(reasons["not_consumable"] == 1)
        #expect(reasons["consumed_without_grant"] == 1)
        // The forged token is rejected, or — when a rebalance redelivers it after the owner's grant — a duplicate.
        #expect((reasons["invalid_purchase"] ?? 0) + (report.outcomes["duplicate"] ?? 0) == 1 + 3)
        #expect(report.rendered.contains("Every valid purchase was granted once"))
        // The purchase paid and never reported is found by the reconciler and granted once, and says so.
        #expect(report.reconciled["granted"] == 1)
        #expect(report.reconciledPaymentSeqs == [DemoBatch.unreported.paymentSeq])
        #expect(report.simulatorConsumes[DemoBatch.unreported.paymentSeq] == 1)
        #expect(report.rendered.contains("found 1 payment(s) paid but never reported (demo-unreported)"))
        // The store refunds demo-0 after its grant: revoked once, one item-revoked event; a refund of a payment the
        // ledger never saw is kept pending.
        #expect(report.refunds.revocation.paymentSeq == DemoBatch.refunded)
        #expect(report.revokedEventIDs == ["demo-0:item-revoked"])
        #expect(report.refunds.unseenPending)
        #expect(report.rendered.contains("its grant revoked once, 1 item-revoked event (demo-0:item-revoked)"))
    }
}

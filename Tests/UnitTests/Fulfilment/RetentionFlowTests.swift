import Foundation
import Fulfilment
import IAPTestSupport
import Testing

/// What the flow makes of a message whose ledger rows retention removed: it is judged again, to the same verdict
/// and the same event id, and a grant — never pruned — keeps it from being granted twice.
@Suite("Messages after retention pruned their rows", .timeLimit(.minutes(3)))
struct RetentionFlowTests {
    /// Prunes every row of `rows`, whatever its age.
    static func pruneAll(_ rows: PrunableRows, _ h: FlowHarness) async throws -> Int {
        let store = h.ledger.base
        var total = 0
        while let deleted = try await store.prune(rows, before: Date().addingTimeInterval(3_600), limit: 1_000),
            deleted > 0
        {
            total += deleted
        }
        return total
    }

    static func eventIDs(_ h: FlowHarness) -> [String] {
        h.publisher.events(on: h.topics.failed).compactMap { $0["id"] as? String }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aForgedClaimRepeatedAfterItsRejectionWasPrunedIsRejectedAgainUnderTheSameEventID(backend: LedgerBackend)
        async throws
    {
        try await FlowHarness.run(backend) { (h: FlowHarness) async throws in
            h.payment("7001", user: "owner")
            #expect(try await h.process("7001", user: "thief") == .rejected(paymentSeq: "7001", reason: .userMismatch))
            #expect(try await h.process("7001", user: "thief") == .duplicate(paymentSeq: "7001"))
            #expect(try await Self.pruneAll(.unconfirmedRejections, h) == 1)
            #expect(try await h.ledger.rejections(paymentSeq: "7001").isEmpty)
            // Its published consume-failed event went with it.
            #expect(try await h.ledger.base.events(paymentSeq: "7001").isEmpty)

            #expect(try await h.process("7001", user: "thief") == .rejected(paymentSeq: "7001", reason: .userMismatch))
            let ids = Self.eventIDs(h)
            #expect(ids.count == 2)
            #expect(Set(ids).count == 1)
            #expect(try await h.ledger.grant(paymentSeq: "7001") == nil)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aGrantOutlivesItsPrunedEventAndItsRepeatsStayDuplicates(backend: LedgerBackend) async throws {
        try await FlowHarness.run(backend) { (h: FlowHarness) async throws in
            h.payment("7002", user: "owner")
            #expect(try await h.process("7002") == .granted(paymentSeq: "7002", consumePending: false))
            #expect(try await h.process("7002", user: "thief") == .rejected(paymentSeq: "7002", reason: .userMismatch))
            #expect(try await Self.pruneAll(.publishedOutbox, h) == 2)
            #expect(try await Self.pruneAll(.unconfirmedRejections, h) == 1)
            #expect(try await h.ledger.base.events(paymentSeq: "7002").isEmpty)
            #expect(try await h.ledger.grant(paymentSeq: "7002")?.eventPublishedAt != nil)

            #expect(try await h.process("7002") == .duplicate(paymentSeq: "7002"))
            // The thief's repeat meets the grant: rejected again without a Gamebase call, never granted.
            #expect(try await h.process("7002", user: "thief") == .rejected(paymentSeq: "7002", reason: .userMismatch))
            #expect(h.gamebase.successfulConsumes("7002") == 1)
            #expect(h.publisher.records(on: h.topics.granted).count == 1)
            #expect(Set(Self.eventIDs(h)).count == 1)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aConfirmedRejectionRepeatedAfterPruningGetsTheSameVerdict(backend: LedgerBackend) async throws {
        try await FlowHarness.run(backend, rejectTestPurchases: true) { (h: FlowHarness) async throws in
            h.payment("7003", user: "owner", test: true)
            #expect(try await h.process("7003") == .rejected(paymentSeq: "7003", reason: .testPurchase))
            // A confirmed rejection is not among the unconfirmed ones.
            #expect(try await Self.pruneAll(.unconfirmedRejections, h) == 0)
            #expect(try await Self.pruneAll(.confirmedRejections, h) == 1)
            #expect(try await h.process("7003") == .rejected(paymentSeq: "7003", reason: .testPurchase))
            #expect(Set(Self.eventIDs(h)).count == 1)
            #expect(try await h.ledger.grant(paymentSeq: "7003") == nil)
        }
    }
}

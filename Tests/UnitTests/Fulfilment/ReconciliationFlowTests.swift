import Foundation
import Fulfilment
import Gamebase
import IAPTestSupport
import Synchronization
import Testing

/// A payment found by reconciliation goes through the very flow a message does; these pin what differs (where it
/// came from) and what must not (one grant, one event id, the claim's rejection shared with a later message).
@Suite("Reconciliation through the flow", .timeLimit(.minutes(2)))
struct ReconciliationFlowTests {
    static func reconciled(_ seq: String, user: String = "owner", token: String? = nil) -> PurchaseInput {
        PurchaseInput(
            key: Array(user.utf8), value: FlowHarness.message(seq, user: user, token: token),
            source: MessageSource(topic: "gamebase.list-consumables", partition: -1, offset: -1), timestamp: Date(),
            origin: .reconciliation)
    }

    static func data(_ event: [String: Any]) -> [String: Any] { event["data"] as? [String: Any] ?? [:] }

    @Test(arguments: LedgerBackend.allCases)
    func aReconciledGrantSaysSoInItsEventAndKeepsNoMessageSource(backend: LedgerBackend) async throws {
        try await FlowHarness.run(backend) { (h: FlowHarness) async throws in
            h.payment("r1")
            h.payment("m1")
            #expect(
                try await h.processor.process(Self.reconciled("r1"))
                    == .granted(paymentSeq: "r1", consumePending: false))
            #expect(try await h.process("m1") == .granted(paymentSeq: "m1", consumePending: false))

            let reconciled = try #require(try await h.ledger.grant(paymentSeq: "r1"))
            #expect(reconciled.origin == .reconciliation)
            #expect(reconciled.source == nil, "no record was read for it")
            let messaged = try #require(try await h.ledger.grant(paymentSeq: "m1"))
            #expect(messaged.origin == .message)
            #expect(messaged.source == MessageSource(topic: "purchase.completed", partition: 0, offset: 0))

            let sources = Dictionary(
                uniqueKeysWithValues: h.publisher.events(on: h.topics.granted).map {
                    (Self.data($0)["paymentSeq"] as? String ?? "?", Self.data($0)["source"] as? String ?? "absent")
                })
            #expect(sources == ["r1": "reconciliation", "m1": "message"], "data.source is always written")
            // The late message of the reconciled payment is a duplicate: nothing new is published.
            #expect(try await h.process("r1") == .duplicate(paymentSeq: "r1"))
            #expect(h.publisher.events(on: h.topics.granted).count == 2)
            #expect(h.gamebase.successfulConsumes("r1") == 1)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aReconciliationAndALateMessageAtOnceGrantOnce(backend: LedgerBackend) async throws {
        try await FlowHarness.run(backend) { (h: FlowHarness) async throws in
            h.payment("race-r")
            // Both verify with Gamebase before either writes: the unique paymentSeq must settle it.
            let barrier = Barrier(parties: 2)
            h.gamebase.verifyInterceptor.withLock { $0 = { _ in await barrier.arrive() } }
            async let fromMessage = h.process("race-r", offset: 9)
            async let fromReconciliation = h.processor.process(Self.reconciled("race-r"))
            let outcomes = [try await fromMessage, try await fromReconciliation]
            #expect(outcomes.filter { if case .granted = $0 { true } else { false } }.count == 1, "\(outcomes)")
            #expect(outcomes.contains(.duplicate(paymentSeq: "race-r")), "\(outcomes)")
            #expect(h.gamebase.verifyCalls == 2)
            try await CrashAndRaceTests.expectInvariants(h, "race-r")
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aReconciliationRejectionIsPublishedOnceAndAnsweredFromTheLedgerAfterwards(backend: LedgerBackend) async throws
    {
        try await FlowHarness.run(backend, rejectTestPurchases: true) { (h: FlowHarness) async throws in
            h.payment("sub-1", type: GamebaseProductType.autoRenewable)
            h.payment("test-1", test: true)
            #expect(
                try await h.processor.process(Self.reconciled("sub-1"))
                    == .rejected(paymentSeq: "sub-1", reason: .notConsumable))
            #expect(
                try await h.processor.process(Self.reconciled("test-1"))
                    == .rejected(paymentSeq: "test-1", reason: .testPurchase))
            #expect(h.gamebase.verifyCalls == 2)
            // The next pass, and the player's own late message (the same claim), are answered by the ledger.
            #expect(try await h.processor.process(Self.reconciled("sub-1")) == .duplicate(paymentSeq: "sub-1"))
            #expect(try await h.process("sub-1") == .duplicate(paymentSeq: "sub-1"))
            #expect(try await h.process("test-1") == .duplicate(paymentSeq: "test-1"))
            #expect(h.gamebase.verifyCalls == 2, "a rejected claim is never verified again")
            let failed = h.publisher.events(on: h.topics.failed).map(Self.data)
            #expect(failed.count == 2, "one consume-failed event per judged claim: downstream hears of it once")
            #expect(failed.allSatisfy { ($0["detail"] as? String)?.hasSuffix("(found by reconciliation)") == true })
            #expect(try await h.ledger.grant(paymentSeq: "sub-1") == nil)
            #expect(try await h.ledger.grant(paymentSeq: "test-1") == nil)
            #expect(h.gamebase.consumeCalls == 0)
            let rejection = try #require(try await h.ledger.rejections(paymentSeq: "sub-1").first)
            #expect(rejection.source == nil)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aListedPaymentAnsweredWithAnErrorCodeIsLeftUndecidedSoALaterPassOrTheLateMessageGrantsIt(
        backend: LedgerBackend
    ) async throws {
        try await FlowHarness.run(backend) { (h: FlowHarness) async throws in
            h.payment("code-r")
            h.payment("code-m")
            // 5000 (or a store still verifying): an error code, not a verdict on a payment Gamebase listed as paid.
            h.gamebase.failVerify([FakeGamebase.error(.consumeFailed)])
            let outcome = try await h.processor.process(Self.reconciled("code-r"))
            guard case .gamebaseUnavailable(let error, _) = outcome else {
                Issue.record("expected nothing decided, got \(outcome)")
                return
            }
            #expect(error.resultCode == .consumeFailed)
            #expect(try await h.ledger.rejections(paymentSeq: "code-r").isEmpty, "no rejection recorded for its claim")
            #expect(h.publisher.events(on: h.topics.failed).isEmpty, "nothing told downstream: nothing was decided")
            // The player's own late message (the same claim) is judged, not answered by a rejection.
            #expect(try await h.process("code-r") == .granted(paymentSeq: "code-r", consumePending: false))

            // The message path is unchanged: a message's claim answered with 5000 is rejected.
            h.gamebase.failVerify([FakeGamebase.error(.consumeFailed)])
            #expect(try await h.process("code-m") == .rejected(paymentSeq: "code-m", reason: .invalidPurchase))
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aListedPaymentAnsweredWithAnErrorCodeIsGrantedByTheNextPassOnceGamebaseAnswers(backend: LedgerBackend)
        async throws
    {
        try await FlowHarness.run(backend) { (h: FlowHarness) async throws in
            h.payment("code-n")
            h.gamebase.failVerify([FakeGamebase.error(.consumeFailed)])
            _ = try await h.processor.process(Self.reconciled("code-n"))
            #expect(
                try await h.processor.process(Self.reconciled("code-n"))
                    == .granted(paymentSeq: "code-n", consumePending: false))
            #expect(try await h.process("code-n") == .duplicate(paymentSeq: "code-n"))
        }
    }
}

/// Lets `parties` tasks wait for each other.
actor Barrier {
    private let parties: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(parties: Int) { self.parties = parties }

    func arrive() async {
        if waiting.count + 1 >= parties {
            let released = waiting
            waiting = []
            for continuation in released { continuation.resume() }
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }
}

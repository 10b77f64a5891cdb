import Foundation
import Fulfilment
import Gamebase
import IAPTestSupport
import Synchronization
import Testing

@Suite("Crash points and races", .timeLimit(.minutes(3)))
struct CrashAndRaceTests {
    /// The invariants of DESIGN §1 for one valid purchase.
    static func expectInvariants(_ h: FlowHarness, _ seq: String) async throws {
        let grant = try #require(try await h.ledger.grant(paymentSeq: seq))
        #expect(grant.state == .consumed, "Consume eventually succeeded")
        #expect(h.gamebase.successfulConsumes(seq) == 1, "Gamebase consumed it once")
        let ids = Set(h.publisher.events(on: h.topics.granted).compactMap { $0["id"] as? String })
        #expect(ids == ["\(seq):item-granted"], "one item-granted event id")
        #expect(h.publisher.records(on: h.topics.failed).isEmpty)
        #expect(try await h.ledger.stats().granted + (try await h.ledger.stats().consumed) == 1, "one grant")
    }

    @Test(arguments: CrashingLedger.Step.allCases)
    func aCrashAfterAnyLedgerStepIsFinishedByRedelivery(step: CrashingLedger.Step) async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("c1")
            if step == .recordConsumeFailure { h.gamebase.failConsume([FakeGamebase.timeout]) }
            h.ledger.crashAt.withLock { $0 = step }
            do {
                _ = try await h.process("c1")
                if step != .recordConsumeFailure { Issue.record("the injected crash at \(step) did not surface") }
            } catch is CrashingLedger.Crash {}
            // Redelivered, maybe more than once: the same end state.
            _ = try await h.process("c1")
            _ = try await h.process("c1")
            try await Self.expectInvariants(h, "c1")
        }
    }

    @Test func aCrashAfterConsumeAppliedButBeforeItsAnswerIsFinished() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("c2")
            // Consume applies but its answer is lost; the retry learns 5018; the worker dies before recording it.
            h.gamebase.state.withLock { $0.consumeAppliesThenFails = FakeGamebase.timeout }
            h.ledger.crashAt.withLock { $0 = .markConsumed }
            await #expect(throws: CrashingLedger.Crash.self) { try await h.process("c2") }
            _ = try await h.process("c2")
            try await Self.expectInvariants(h, "c2")
            #expect(try await h.ledger.grant(paymentSeq: "c2")?.lastResultCode == 5018)
        }
    }

    @Test func aCrashBeforeTheEventWasPublishedRepublishesTheSameID() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("c3")
            h.publisher.failNext(1)
            _ = try? await h.process("c3")
            h.ledger.crashAt.withLock { $0 = .markPublished }
            _ = try? await h.process("c3")  // published, crashed before recording it
            _ = try await h.process("c3")  // published again, same id
            try await Self.expectInvariants(h, "c3")
            #expect(h.publisher.events(on: h.topics.granted).count == 2)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func manyConcurrentFlowsForOnePaymentGrantItOnce(backend: LedgerBackend) async throws {
        try await FlowHarness.run(backend) { (h: FlowHarness) async throws in
            h.payment("race-1")
            let outcomes = try await withThrowingTaskGroup(of: PurchaseOutcome.self) { group in
                for i in 0..<24 {
                    group.addTask { try await h.process("race-1", offset: Int64(i)) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.filter { if case .granted = $0 { true } else { false } }.count == 1)
            #expect(
                outcomes.allSatisfy {
                    if case .granted = $0 { true } else { $0 == PurchaseOutcome.duplicate(paymentSeq: "race-1") }
                })
            try await Self.expectInvariants(h, "race-1")
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func manyConcurrentFlowsForManyPaymentsGrantEachOnce(backend: LedgerBackend) async throws {
        try await FlowHarness.run(backend) { (h: FlowHarness) async throws in
            for i in 0..<60 { h.payment("many-\(i)", user: "u\(i)") }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for round in 0..<3 {
                    for i in 0..<60 {
                        group.addTask {
                            _ = try await h.process("many-\(i)", user: "u\(i)", offset: Int64(round * 100 + i))
                        }
                    }
                }
                try await group.waitForAll()
            }
            let stats = try await h.ledger.stats()
            #expect(stats.consumed == 60)
            #expect(stats.granted == 0)
            for i in 0..<60 { #expect(h.gamebase.successfulConsumes("many-\(i)") == 1) }
            #expect(Set(h.publisher.events(on: h.topics.granted).compactMap { $0["id"] as? String }).count == 60)
        }
    }
}

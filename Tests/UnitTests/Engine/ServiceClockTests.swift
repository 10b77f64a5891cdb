import Foundation
import Fulfilment
import Gamebase
import IAPTestSupport
import InMemoryLedger
import Testing

@testable import Engine

/// The background services' timing on a test clock: what each does at which moment, without waiting for it.
@Suite("Background services on a test clock", .timeLimit(.minutes(1)))
struct ServiceClockTests {
    @Test func theSweeperLeavesAGrantToItsFlowForTheGraceThenConsumesItOnItsInterval() async throws {
        let harness = EngineHarness(sweep: .init(interval: .seconds(10), grace: .seconds(30), lease: .seconds(60)))
        try await harness.unfinishedGrant("s1")
        let sweeper = Task { try await harness.services.sweeper.run() }
        defer { sweeper.cancel() }
        // Passes at 0 … 30 s: the grant is not older than the grace, still the flow's.
        for pass in 0..<4 {
            try await harness.clock.sleepers(atLeast: 1)
            #expect(harness.clock.nextDeadline == .seconds(10 * (pass + 1)), "the sweeper's interval")
            #expect(harness.gamebase.consumeCalls == 0)
            harness.clock.advance(by: .seconds(10))
        }
        // The pass at 40 s: the grant is older than the grace; its event is published and Consume called once.
        try await EngineHarness.eventually("the sweeper consumed s1") {
            try await harness.ledger.grant(paymentSeq: "s1")?.state == .consumed
        }
        #expect(harness.gamebase.consumeCalls == 1)
        #expect(harness.publisher.records(on: "iap.item-granted").count == 1)
        #expect(harness.clock.elapsed == .seconds(40))
    }

    @Test func aGrantWhoseConsumeFailedIsLeftAloneUntilItsLeaseRunsOut() async throws {
        let harness = EngineHarness(sweep: .init(interval: .seconds(10), grace: .zero, lease: .seconds(55)))
        try await harness.unfinishedGrant("s2")
        harness.clock.advance(by: .seconds(1))
        harness.gamebase.failConsume([FakeGamebase.timeout, FakeGamebase.timeout])
        let sweeper = Task { try await harness.services.sweeper.run() }
        defer { sweeper.cancel() }
        try await harness.clock.sleepers(atLeast: 1)
        #expect(harness.gamebase.consumeCalls == 2, "the first pass tries (and retries) Consume")
        // Passes at 11 … 51 s find the grant leased (until 56 s) to the pass that tried it.
        for _ in 0..<5 {
            harness.clock.advance(by: .seconds(10))
            try await harness.clock.sleepers(atLeast: 1)
            #expect(harness.gamebase.consumeCalls == 2)
        }
        harness.clock.advance(by: .seconds(10))
        try await EngineHarness.eventually("the lease ran out and the grant was consumed") {
            try await harness.ledger.grant(paymentSeq: "s2")?.state == .consumed
        }
        #expect(harness.gamebase.consumeCalls == 3)
    }

    @Test func thePrunerWaitsItsFirstPassDelayThenPrunesOncePerInterval() async throws {
        var policy = RetentionPolicy()
        policy.interval = .seconds(300)
        policy.firstPassDelay = .seconds(30)
        let harness = EngineHarness(retention: policy)
        // An event published 100 hours ago: past the outbox's 72 hours.
        try await harness.publishedLongAgo("p1")
        let pruner = Task { try await harness.services.pruner.run() }
        defer { pruner.cancel() }
        try await harness.clock.sleepers(atLeast: 1)
        #expect(harness.clock.nextDeadline == .seconds(30), "the first pass's delay")
        harness.clock.advance(by: .seconds(29))
        try await harness.clock.sleepers(atLeast: 1)
        #expect(try await harness.ledger.event(id: "p1:item-granted") != nil, "pruned before the first pass's delay")
        harness.clock.advance(by: .seconds(1))
        try await EngineHarness.eventually("the first pass pruned p1's event") {
            try await harness.ledger.event(id: "p1:item-granted") == nil
        }
        // Another old event, once the first pass is over: left until the next pass, one interval later.
        try await harness.clock.sleepers(atLeast: 1)
        #expect(harness.clock.nextDeadline == .seconds(330), "one interval after the first pass")
        try await harness.publishedLongAgo("p2")
        harness.clock.advance(by: .seconds(299))
        try await harness.clock.sleepers(atLeast: 1)
        #expect(try await harness.ledger.event(id: "p2:item-granted") != nil, "pruned before the interval")
        harness.clock.advance(by: .seconds(1))
        try await EngineHarness.eventually("the second pass pruned p2's event") {
            try await harness.ledger.event(id: "p2:item-granted") == nil
        }
    }

    /// A refresh of the users table that fails must not stop the pass: the users already due are still checked.
    @Test func aPassWhoseRefreshFailsStillChecksTheUsersAlreadyDue() async throws {
        let harness = EngineHarness(
            reconcile: .init(interval: .seconds(600), grace: .seconds(600), lookback: .seconds(3_600)),
            reconciliation: { FailingRefreshLedger(base: $0) })
        try await harness.unfinishedGrant("f1", user: "player")
        // The users table as an earlier refresh left it.
        _ = try await harness.ledger.refreshReconciliationUsers(activeSince: harness.clock.now.addingTimeInterval(-60))
        let reconciler = Task { try await harness.services.reconciler.run() }
        defer { reconciler.cancel() }
        try await harness.clock.sleepers(atLeast: 1)
        #expect(harness.gamebase.listCalls == ["player"])
    }

    @Test func theReconcilerChecksADueUserOncePerInterval() async throws {
        let harness = EngineHarness(
            reconcile: .init(interval: .seconds(600), grace: .seconds(600), lookback: .seconds(3_600)))
        try await harness.unfinishedGrant("r1", user: "player")
        let reconciler = Task { try await harness.services.reconciler.run() }
        defer { reconciler.cancel() }
        try await harness.clock.sleepers(atLeast: 1)
        #expect(harness.gamebase.listCalls == ["player"], "the first pass checks the user")
        #expect(harness.clock.nextDeadline == .seconds(600), "one interval after the first pass began")
        harness.clock.advance(by: .seconds(599))
        try await harness.clock.sleepers(atLeast: 1)
        #expect(harness.gamebase.listCalls == ["player"], "checked again before the interval")
        harness.clock.advance(by: .seconds(1))
        try await EngineHarness.eventually("the second pass checked the user again") {
            harness.gamebase.listCalls == ["player", "player"]
        }
    }
}

/// The memory ledger's reconciliation role whose users-table refresh always fails (a chunk too large for the ledger's
/// deadline, a lock conflict between instances).
struct FailingRefreshLedger: ReconciliationLedger {
    let base: MemoryLedger

    func reconciliationUsers(activeSince: Date, dueAt: Date?, limit: Int) async throws -> [String] {
        try await base.reconciliationUsers(activeSince: activeSince, dueAt: dueAt, limit: limit)
    }
    func refreshReconciliationUsers(activeSince: Date) async throws -> Bool {
        throw LedgerError(code: .query, message: "canceling statement due to statement timeout")
    }
    func claimReconciliationUsers(_ userIds: [String], now: Date, nextCheck: Date) async throws -> [String] {
        try await base.claimReconciliationUsers(userIds, now: now, nextCheck: nextCheck)
    }
    func reconciliationSightings(_ payments: [ReconciliationSighting], now: Date, record: Bool) async throws
        -> [String: Date]
    {
        try await base.reconciliationSightings(payments, now: now, record: record)
    }
    func forgetReconciliationSightings(paymentSeqs: [String]) async throws {
        try await base.forgetReconciliationSightings(paymentSeqs: paymentSeqs)
    }
    func pruneReconciliation(before: Date) async throws { try await base.pruneReconciliation(before: before) }
}

extension EngineHarness {
    /// A grant whose item-granted event was published 100 hours before the clock's now.
    func publishedLongAgo(_ seq: String) async throws {
        try await unfinishedGrant(seq)
        try await ledger.markPublished(eventID: "\(seq):item-granted", at: clock.now.addingTimeInterval(-100 * 3_600))
    }

    /// A clock whose sleeps move it (what the reconciliation tests run the rate limiter on): a sleep returns at once,
    /// having moved the clock by its length; no sleep moves it backwards; a cancelled task's sleep throws.
    @Test func aClockWhoseSleepsAdvanceMovesByEachSleepAndNeverWaits() async throws {
        let clock = TestClock(now: Date(timeIntervalSince1970: 1_000), sleepsAdvance: true)
        let started = ContinuousClock.now
        try await clock.sleep(for: .seconds(3_600))
        try await clock.sleep(for: .milliseconds(250))
        try await clock.sleep(for: .zero)
        try await clock.sleep(for: .seconds(-5))
        #expect(clock.elapsed == .seconds(3_600) + .milliseconds(250))
        #expect(clock.now == Date(timeIntervalSince1970: 1_000 + 3_600.25))
        #expect(ContinuousClock.now - started < .seconds(5), "an hour of sleep took no real time")
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(for: .seconds(1))
        }
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(clock.elapsed == .seconds(3_600) + .milliseconds(250), "a cancelled sleep moves nothing")
    }
}

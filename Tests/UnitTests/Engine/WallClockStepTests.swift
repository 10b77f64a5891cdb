import Foundation
import Fulfilment
import IAPTestSupport
import InMemoryLedger
import Testing

@testable import Engine

/// A wall clock that steps (NTP, a VM resumed after hours, `date -s`) while the monotonic one runs on: windows over
/// stored times are never cut short by a step forward, and each step is said.
@Suite("The wall clock steps", .timeLimit(.minutes(1)))
struct WallClockStepTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aCutoffIsHeldBackByAForwardStepForItsWindowThenFollowsTheWallClock() {
        let instant = ContinuousClock.now
        let steps = WallClockSteps(wall: Self.start, instant: instant)
        let hour = Duration.seconds(3_600)
        // 10 s later, stepped forward two hours: a stamp of 10 s ago is not older than a minute.
        let afterStep = Self.start.addingTimeInterval(10 + 7_200)
        #expect(
            steps.cutoff(olderThan: .seconds(60), wall: afterStep, instant: instant + .seconds(10))
                == afterStep.addingTimeInterval(-60 - 7_200))
        // A window of an hour: held back for an hour after the step, then the wall clock's.
        #expect(
            steps.cutoff(olderThan: hour, wall: afterStep.addingTimeInterval(3_599), instant: instant + .seconds(3_609))
                == afterStep.addingTimeInterval(3_599 - 3_600 - 7_200))
        #expect(
            steps.cutoff(olderThan: hour, wall: afterStep.addingTimeInterval(3_601), instant: instant + .seconds(3_611))
                == afterStep.addingTimeInterval(3_601 - 3_600))
        // The minute's window has long passed: the wall clock's.
        #expect(
            steps.cutoff(
                olderThan: .seconds(60), wall: afterStep.addingTimeInterval(61), instant: instant + .seconds(71))
                == afterStep.addingTimeInterval(1))
    }

    @Test func aStepBackAndSlewAreNotHeldBackAndOnlyJumpsAreSteps() {
        let instant = ContinuousClock.now
        let steps = WallClockSteps(wall: Self.start, instant: instant)
        // An hour at NTP's 500 ppm slew: 1.8 s apart, within the allowance for the time between readings.
        #expect(steps.observe(wall: Self.start.addingTimeInterval(3_601.8), instant: instant + .seconds(3_600)) == nil)
        // An hour back, then the cutoff follows the wall clock (earlier stamps look younger: waits are longer).
        let back = steps.observe(
            wall: Self.start.addingTimeInterval(3_602.8 - 3_600), instant: instant + .seconds(3_601))
        #expect(back.map { ($0.seconds * 10).rounded() / 10 } == -3_600)
        #expect(
            steps.cutoff(
                olderThan: .seconds(30), wall: Self.start.addingTimeInterval(5), instant: instant + .seconds(3_603))
                == Self.start.addingTimeInterval(-25))
        // Readings out of order (two threads) say nothing.
        #expect(steps.observe(wall: Self.start.addingTimeInterval(9_000), instant: instant + .seconds(1)) == nil)
        #expect(steps.steps(after: 0).steps.count == 1)
    }

    @Test func theSweeperLeavesAGrantToItsFlowForTheWholeGraceAcrossAForwardStep() async throws {
        let harness = EngineHarness(sweep: .init(interval: .seconds(10), grace: .seconds(30), lease: .seconds(60)))
        try await harness.unfinishedGrant("s1")
        harness.clock.advance(by: .seconds(5))
        harness.clock.stepWall(by: .seconds(7_200))
        // Stamped 5 s ago, although the wall clock says two hours: still the flow's.
        _ = await harness.services.sweeper.sweepOnce()
        #expect(harness.gamebase.consumeCalls == 0, "a step forward cut the grace short")
        harness.clock.advance(by: .seconds(26))
        let result = await harness.services.sweeper.sweepOnce()
        #expect(result.consumed == 1)
        #expect(try await harness.ledger.grant(paymentSeq: "s1")?.state == .consumed)
    }

    @Test func thePrunerDeletesNothingAForwardStepMadeLookOld() async throws {
        var policy = RetentionPolicy()
        policy.publishedOutboxHours = 1
        let harness = EngineHarness(retention: policy)
        try await harness.unfinishedGrant("p1")
        try await harness.ledger.markPublished(eventID: "p1:item-granted", at: harness.clock.now)
        harness.clock.advance(by: .seconds(600))
        harness.clock.stepWall(by: .seconds(7_200))
        _ = await harness.services.pruner.pruneOnce()
        #expect(try await harness.ledger.event(id: "p1:item-granted") != nil, "published 10 minutes ago, pruned")
        // An hour after it was published (by the monotonic clock), it goes.
        harness.clock.advance(by: .seconds(3_001))
        _ = await harness.services.pruner.pruneOnce()
        #expect(try await harness.ledger.event(id: "p1:item-granted") == nil)
    }

    @Test func eachStepIsSaidOnceWithItsSizeAndCounted() async throws {
        let clock = TestClock()
        let metrics = RecordingMetrics()
        let logs = RecordingLogHandler.Recorder()
        let watch = WallClockWatch(clock: clock, metrics: metrics, logger: logs.logger())
        #expect(watch.check().isEmpty)
        clock.advance(by: .seconds(1))
        clock.stepWall(by: .seconds(-3_600))
        clock.advance(by: .seconds(1))
        #expect(watch.check().count == 1)
        clock.stepWall(by: .seconds(7_200))
        // A cutoff read before the watch's second sees the step first: it is still said, once.
        _ = clock.wallCutoff(olderThan: .seconds(30))
        #expect(watch.check().count == 1)
        #expect(watch.check().isEmpty)
        #expect(metrics.values.wallClockSteps == [false, true])
        let warnings = logs.all.filter { $0.message.contains("the wall clock stepped") }
        #expect(warnings.count == 2, "\(warnings)")
    }
}

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

    /// A reading of both clocks, `seconds` of monotonic time after `instant`, the wall clock at `wall`.
    static func reading(
        _ wall: Date, _ instant: ContinuousClock.Instant, after seconds: Int64, spread: Duration = .zero
    )
        -> () -> (wall: Date, instant: ContinuousClock.Instant, spread: Duration)
    {
        { (wall, instant + .seconds(seconds), spread) }
    }

    @Test func aCutoffIsHeldBackByAForwardStepForItsWindowThenFollowsTheWallClock() {
        let instant = ContinuousClock.now
        let steps = WallClockSteps(wall: Self.start, instant: instant)
        let hour = Duration.seconds(3_600)
        // 10 s later, stepped forward two hours: a stamp of 10 s ago is not older than a minute.
        let afterStep = Self.start.addingTimeInterval(10 + 7_200)
        #expect(
            steps.cutoff(olderThan: .seconds(60), reading: Self.reading(afterStep, instant, after: 10))
                == afterStep.addingTimeInterval(-60 - 7_200))
        // A window of an hour: held back for an hour after the step, then the wall clock's.
        #expect(
            steps.cutoff(olderThan: hour, reading: Self.reading(afterStep + 3_599, instant, after: 3_609))
                == afterStep.addingTimeInterval(3_599 - 3_600 - 7_200))
        #expect(
            steps.cutoff(olderThan: hour, reading: Self.reading(afterStep + 3_601, instant, after: 3_611))
                == afterStep.addingTimeInterval(3_601 - 3_600))
        // The minute's window has long passed: the wall clock's.
        #expect(
            steps.cutoff(olderThan: .seconds(60), reading: Self.reading(afterStep + 61, instant, after: 71))
                == afterStep.addingTimeInterval(1))
    }

    @Test func aStepBackIsNotHeldBackAndReadingsThatSayNothingAreSkipped() {
        let instant = ContinuousClock.now
        let steps = WallClockSteps(wall: Self.start, instant: instant)
        // Half a second off after an hour: noise, not a step.
        #expect(steps.observe(reading: Self.reading(Self.start + 3_600.5, instant, after: 3_600)) == nil)
        // An hour back, then the cutoff follows the wall clock (earlier stamps look younger: waits are longer).
        let back = steps.observe(reading: Self.reading(Self.start + 1.5, instant, after: 3_601))
        #expect(back.map { ($0.seconds * 10).rounded() / 10 } == -3_600)
        #expect(
            steps.cutoff(olderThan: .seconds(30), reading: Self.reading(Self.start + 5, instant, after: 3_604))
                == Self.start.addingTimeInterval(-25))
        // A reading older than the last, or one whose monotonic readings lie far apart (the thread was preempted
        // between them), says nothing, and leaves the last reading as it was.
        #expect(steps.observe(reading: Self.reading(Self.start + 9_000, instant, after: 1)) == nil)
        #expect(
            steps.observe(
                reading: Self.reading(Self.start + 9_000, instant, after: 3_700, spread: .milliseconds(500))) == nil)
        #expect(steps.observe(reading: Self.reading(Self.start + 101.5, instant, after: 3_701)) == nil)
        #expect(steps.steps(after: 0).steps.count == 1)
    }

    /// The first reading after a step, torn by the scheduler (too far apart to record the step from), still holds the
    /// cutoff back; the next clean reading records the step.
    @Test func aTornReadingAfterAForwardStepIsHeldBackAndTheNextRecordsIt() {
        let instant = ContinuousClock.now
        let steps = WallClockSteps(wall: Self.start, instant: instant)
        let wall = Self.start + 10 + 7_200
        #expect(
            steps.cutoff(
                olderThan: .seconds(60), reading: Self.reading(wall, instant, after: 10, spread: .milliseconds(500)))
                == wall.addingTimeInterval(-60 - 7_200))
        #expect(steps.observe(reading: Self.reading(wall + 1, instant, after: 11)).map(\.seconds) == 7_200)
    }

    /// More forward steps than are kept: the oldest are merged, and the cutoff is held back by all of them still.
    @Test func manyForwardStepsWithinAWindowAllHoldItBack() {
        let instant = ContinuousClock.now
        let steps = WallClockSteps(wall: Self.start, instant: instant)
        var wall = Self.start
        for i in 1...300 {
            wall += 1 + 2  // a second of time, two of step
            #expect(steps.observe(reading: Self.reading(wall, instant, after: Int64(i))) != nil)
        }
        let day = Duration.seconds(86_400)
        #expect(
            steps.cutoff(olderThan: day, reading: Self.reading(wall, instant, after: 300))
                == wall.addingTimeInterval(-86_400 - 600))
        #expect(steps.steps(after: 0).steps.count == 64, "the reporter's recent steps are bounded")
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

import Testing
import Worker

@Suite struct OffsetTrackerTests {
    @Test func theWatermarkNeverJumpsPastAnOffsetStillInFlight() {
        var tracker = OffsetTracker()
        for offset in [10, 11, 12, 15, 16] as [Int64] { tracker.started(offset) }
        let r1 = tracker.finished(11)
        #expect(r1 == nil)
        let r2 = tracker.finished(15)
        #expect(r2 == nil)
        #expect(tracker.watermark == nil)
        let r3 = tracker.finished(10)
        #expect(r3 == 12, "10 and 11 done: next to commit is 12")
        let r4 = tracker.finished(12)
        #expect(r4 == 16, "gaps in offsets (compaction, markers) are fine")
        #expect(tracker.outstanding == 1)
        let r5 = tracker.finished(16)
        #expect(r5 == 17)
        #expect(tracker.outstanding == 0)
    }

    @Test func inOrderFinishingMovesTheWatermarkEachTime() {
        var tracker = OffsetTracker()
        for offset in 0..<5 as Range<Int64> { tracker.started(offset) }
        for offset in 0..<5 as Range<Int64> { #expect(tracker.finished(offset) == offset + 1) }
    }
}

@Suite struct CircuitBreakerTests {
    let configuration = CircuitBreaker.Configuration(
        failureRatio: 0.5, minimumSamples: 4, window: .seconds(10), openDuration: .seconds(1), maxOpenDuration: .seconds(4))

    @Test func itOpensWhenMostRecentCallsFailAndLetsOneProbeThroughLater() {
        var breaker = CircuitBreaker(configuration: configuration)
        let start = ContinuousClock.now
        let r6 = breaker.record(failed: false, now: start)
        #expect(r6 == nil)
        let r7 = breaker.record(failed: true, now: start)
        #expect(r7 == nil)
        let r8 = breaker.record(failed: true, now: start)
        #expect(r8 == nil, "too few samples yet")
        let r9 = breaker.record(failed: true, now: start)
        #expect(r9 == .opened)
        #expect(breaker.isOpen)
        let r10 = breaker.allowAttempt(now: start + .milliseconds(500))
        #expect(r10 == false)
        let r11 = breaker.allowAttempt(now: start + .seconds(1))
        #expect(r11 == true, "the first caller after the open period probes")
        let r12 = breaker.allowAttempt(now: start + .seconds(1))
        #expect(r12 == false, "only one probe at a time")
        let r13 = breaker.record(failed: false, now: start + .seconds(1))
        #expect(r13 == .closed)
        #expect(!breaker.isOpen)
    }

    @Test func aFailedProbeReopensForLonger() {
        var breaker = CircuitBreaker(configuration: configuration)
        let start = ContinuousClock.now
        for _ in 0..<4 { _ = breaker.record(failed: true, now: start) }
        let r14 = breaker.allowAttempt(now: start + .seconds(1))
        #expect(r14)
        let r15 = breaker.record(failed: true, now: start + .seconds(1))
        #expect(r15 == nil)
        let r16 = breaker.allowAttempt(now: start + .seconds(2))
        #expect(r16 == false, "open for 2 s now")
        let r17 = breaker.allowAttempt(now: start + .seconds(3))
        #expect(r17)
    }

    @Test func onlyAHealthyGamebaseLetsAPurchaseBeDeadLettered() {
        var breaker = CircuitBreaker(configuration: configuration)
        let start = ContinuousClock.now
        #expect(breaker.shouldDeadLetter(now: start) == false, "no evidence yet: hold")
        for _ in 0..<6 { _ = breaker.record(failed: false, now: start) }
        _ = breaker.record(failed: true, now: start)
        #expect(breaker.shouldDeadLetter(now: start), "one failure among successes is this purchase's problem")
        #expect(breaker.shouldDeadLetter(now: start + .seconds(11)) == false, "old evidence is forgotten")
    }
}

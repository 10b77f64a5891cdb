import Testing
import Worker

@Suite struct CircuitBreakerTests {
    /// A breaker on a timeline measured in seconds from its start (a class, so calls read inside `#expect`).
    final class Timeline {
        var breaker = CircuitBreaker(
            configuration: .init(
                failureRatio: 0.5, minimumSamples: 4, window: .seconds(10), openDuration: .seconds(1),
                maxOpenDuration: .seconds(4), probeTimeout: .seconds(5)))
        let start = ContinuousClock.now

        func at(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int(seconds * 1000)) }
        func record(failed: Bool, at seconds: Double = 0) -> CircuitBreaker.Transition? {
            breaker.record(failed: failed, now: at(seconds))
        }
        func allowAttempt(at seconds: Double) -> Bool { breaker.allowAttempt(now: at(seconds)) }
        func probeEndedWithoutVerdict(at seconds: Double) { breaker.probeEndedWithoutVerdict(now: at(seconds)) }
        func shouldDeadLetter(at seconds: Double) -> Bool { breaker.shouldDeadLetter(now: at(seconds)) }

        /// Opened at 0 s by four failures.
        static func opened() -> Timeline {
            let timeline = Timeline()
            for _ in 0..<4 { _ = timeline.record(failed: true) }
            return timeline
        }
    }

    @Test func itOpensWhenMostRecentCallsFailAndLetsOneProbeThroughLater() {
        let t = Timeline()
        #expect(t.record(failed: false) == nil)
        #expect(t.record(failed: true) == nil)
        #expect(t.record(failed: true) == nil, "too few samples yet")
        #expect(t.record(failed: true) == .opened)
        #expect(t.breaker.isOpen)
        #expect(t.allowAttempt(at: 0.5) == false)
        #expect(t.allowAttempt(at: 1), "the first caller after the open period probes")
        #expect(t.breaker.isProbing)
        #expect(t.allowAttempt(at: 1) == false, "only one probe at a time")
        #expect(t.record(failed: false, at: 1) == .closed)
        #expect(!t.breaker.isOpen)
        #expect(!t.breaker.isProbing)
    }

    @Test func aFailedProbeReopensForLonger() {
        let t = Timeline.opened()
        #expect(t.allowAttempt(at: 1))
        #expect(t.record(failed: true, at: 1) == nil)
        #expect(t.allowAttempt(at: 2) == false, "open for 2 s now")
        #expect(t.allowAttempt(at: 3))
    }

    @Test func aProbeThatEndsWithoutAVerdictHandsTheProbeOnAtOnce() {
        // The probe's purchase turned out a duplicate, or its partition moved: it never reports on Gamebase.
        let t = Timeline.opened()
        #expect(t.allowAttempt(at: 1))
        #expect(t.allowAttempt(at: 2) == false)
        t.probeEndedWithoutVerdict(at: 2)
        #expect(t.breaker.isOpen, "no verdict: still open")
        #expect(t.allowAttempt(at: 2), "the next held purchase probes without waiting")
        #expect(t.record(failed: false, at: 2) == .closed)
    }

    @Test func aSilentProbeLetsAnotherGoAfterTheProbeTimeout() {
        let t = Timeline.opened()
        #expect(t.allowAttempt(at: 1))
        #expect(t.allowAttempt(at: 5.9) == false, "the probe may still be retrying")
        #expect(t.allowAttempt(at: 6), "5 s of silence: another probe goes")
        #expect(t.allowAttempt(at: 7) == false)
    }

    @Test func endingAProbeIsHarmlessWhenNoneIsUnderWay() {
        let closed = Timeline()
        closed.probeEndedWithoutVerdict(at: 0)
        #expect(!closed.breaker.isOpen)
        let open = Timeline.opened()
        open.probeEndedWithoutVerdict(at: 0)
        #expect(open.allowAttempt(at: 0.5) == false, "the open period still runs")
    }

    @Test func onlyAHealthyGamebaseLetsAPurchaseBeDeadLettered() {
        let t = Timeline()
        #expect(t.shouldDeadLetter(at: 0) == false, "no evidence yet: hold")
        for _ in 0..<6 { _ = t.record(failed: false) }
        _ = t.record(failed: true)
        #expect(t.shouldDeadLetter(at: 0), "one failure among successes is this purchase's problem")
        #expect(t.shouldDeadLetter(at: 11) == false, "old evidence is forgotten")
    }
}

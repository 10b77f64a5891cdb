import Gamebase
import Testing

@testable import Engine

@Suite struct CircuitBreakerTests {
    static let configuration = CircuitBreaker.Configuration(failureRatio: 0.5, minimumSamples: 4, window: .seconds(10))
    static let wrongKey = GamebaseError(
        code: .resultCode, api: "payment_transaction", resultCode: .invalidSecretKey, transactionID: "t",
        message: "wrong key")

    /// A breaker on a timeline measured in seconds from its start.
    struct Timeline {
        var breaker = CircuitBreaker(configuration: CircuitBreakerTests.configuration)
        let start = ContinuousClock.now

        mutating func record(failed: Bool, at seconds: Double = 0) -> CircuitBreaker.Transition? {
            breaker.record(failed: failed, now: start + .milliseconds(Int(seconds * 1000)))
        }
    }

    @Test func itOpensWhenMostRecentPurchasesFailAndOnlyAnAnsweredProbeClosesIt() {
        var t = Timeline()
        #expect(t.record(failed: false) == nil)
        #expect(t.record(failed: true) == nil)
        #expect(t.record(failed: true) == nil, "too few samples yet")
        #expect(t.record(failed: true) == .opened)
        #expect(!t.breaker.allowsCalls)
        #expect(t.record(failed: false) == nil, "a purchase's success does not close it: the probe decides")
        #expect(t.breaker.probeFailed() == nil, "already open")
        #expect(t.breaker.probeAnswered() == .closed)
        #expect(t.breaker.allowsCalls)
    }

    @Test func aFailedProbeOpensItWhateverTheTraffic() {
        var t = Timeline()
        #expect(t.record(failed: false) == nil)
        #expect(t.breaker.probeFailed() == .opened, "one purchase failing while the probe fails too is an outage")
        #expect(t.breaker.probeAnswered() == .closed)
    }

    @Test func onePoisonPurchaseAmongHealthyOnesNeverOpensIt() {
        var t = Timeline()
        for second in 0..<20 {
            #expect(t.record(failed: false, at: Double(second)) == nil)
            if second % 5 == 0 { #expect(t.record(failed: true, at: Double(second)) == nil) }
        }
        #expect(t.breaker.allowsCalls)
    }

    @Test func theOutagesVerdictsAreForgottenWhenItCloses() {
        var t = Timeline()
        for _ in 0..<4 { _ = t.record(failed: true) }
        #expect(t.breaker.probeAnswered() == .closed)
        // The purchases the outage held now fail one more time each as they drain: not enough to reopen at once.
        #expect(t.record(failed: true, at: 1) == nil)
        #expect(t.record(failed: false, at: 1) == nil)
        #expect(t.breaker.allowsCalls)
    }

    @Test func oldVerdictsDoNotCount() {
        var t = Timeline()
        for _ in 0..<3 { _ = t.record(failed: true, at: 0) }
        #expect(t.record(failed: true, at: 11) == nil, "the first three are out of the 10 s window")
        #expect(t.breaker.allowsCalls)
    }

    @Test func aConfigurationFailureStopsItUntilAProbeIsAnswered() {
        var t = Timeline()
        #expect(t.breaker.configurationRejected(Self.wrongKey) == .stopped(Self.wrongKey))
        #expect(t.breaker.isStopped && !t.breaker.allowsCalls)
        #expect(t.breaker.configurationRejected(Self.wrongKey) == nil, "one transition, one log line")
        #expect(t.breaker.probeFailed() == nil, "an outage does not turn a stop into an open circuit")
        #expect(t.breaker.isStopped)
        #expect(t.breaker.probeAnswered() == .resumed)
        #expect(t.breaker.allowsCalls && !t.breaker.isStopped)
    }

    @Test func anOpenCircuitThatMeetsAWrongKeyStops() {
        var t = Timeline()
        _ = t.breaker.probeFailed()
        #expect(t.breaker.configurationRejected(Self.wrongKey) == .stopped(Self.wrongKey))
        #expect(t.breaker.probeAnswered() == .resumed)
    }

    @Test(arguments: [
        (GamebaseResultCode.invalidParameter, "answers"), (.consumeFailed, "answers"), (.unknownError, "unavailable"),
        (.alreadyConsumed, "answers"), (.invalidSecretKey, "misconfigured"), (.invalidAppID, "misconfigured"),
        (.internalSystemError, "unavailable"), (.internalDBError, "unavailable"),
        (.gatewayInternalError, "unavailable"),
    ])
    func aProbeAnswerIsJudgedByItsResultCode(code: GamebaseResultCode, expected: String) {
        let error = GamebaseError(
            code: .resultCode, api: "health_probe", resultCode: code, transactionID: "t", message: "m")
        let verdict = GamebaseProbeVerdict(.failure(error))
        switch verdict {
        case .answers: #expect(expected == "answers")
        case .misconfigured: #expect(expected == "misconfigured")
        case .unavailable: #expect(expected == "unavailable")
        }
    }

    @Test func aProbeWithoutAnAnswerIsUnavailable() {
        for code in [GamebaseError.Code.timeout, .connection, .httpStatus, .invalidResponse] {
            let error = GamebaseError(code: code, api: "health_probe", transactionID: "t", message: "m")
            #expect(GamebaseProbeVerdict(.failure(error)) == .unavailable(error))
        }
    }
}

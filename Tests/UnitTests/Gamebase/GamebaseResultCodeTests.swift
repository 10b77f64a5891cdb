import Gamebase
import Testing
import Wire

@Suite struct GamebaseResultCodeTests {
    /// Every code of contract §8.1 with the class the consume flow acts on.
    static let table: [(Int, GamebaseFailureKind)] =
        [
            (5018, .alreadyConsumed),
            (5000, .permanent), (1100, .permanent), (5032, .permanent), (9999, .transient),
            (-4_001_002, .permanent),
            (-4_000_001, .permanent), (-4_000_006, .permanent), (-4_000_002, .permanent), (-4_000_004, .permanent),
            (-4_000_005, .permanent), (-4_000_003, .permanent), (-4_000_007, .configuration), (-4_000_008, .permanent),
            (-4_010_001, .configuration), (-4_010_002, .configuration), (-4_010_003, .configuration),
            (-4_010_004, .configuration),
            (-4_060_001, .configuration), (-4_060_002, .permanent), (-4_060_003, .configuration),
            (-4_090_001, .transient), (-4_090_002, .transient), (-4_090_003, .transient), (-4_090_004, .transient),
            (-4_150_001, .permanent),
            (-4_010_202, .configuration), (-4_040_201, .configuration), (-4_040_202, .configuration),
            (-4_120_201, .configuration),
            (-4_040_401, .permanent),
        ] + (1...15).map { (-5_000_000 - $0, GamebaseFailureKind.transient) }
        + (1...8).map { (-5_000_200 - $0, .transient) }

    @Test(arguments: table)
    func resultCodeIsClassifiedAsTheContractSays(code: Int, kind: GamebaseFailureKind) {
        #expect(GamebaseResultCode(code).failureKind == kind)
    }

    @Test(arguments: [
        (GamebaseError.Code.timeout, GamebaseFailureKind.transient), (.connection, .transient),
        (.httpStatus, .transient),
        (.invalidResponse, .transient), (.invalidRequest, .permanent),
    ])
    func transportFailuresAreClassified(code: GamebaseError.Code, kind: GamebaseFailureKind) {
        let error = GamebaseError(code: code, api: "consume", transactionID: "t", message: "m")
        #expect(error.kind == kind)
        #expect(error.isRetryable == (kind == .transient))
    }

    @Test func failedEnvelopeWithSuccessCodeIsRetried() {
        // isSuccessful false with resultCode 0 is never documented: retry rather than reject a purchase.
        #expect(GamebaseResultCode(0).failureKind == .transient)
    }
}

@Suite struct RetryPolicyTests {
    @Test func backoffGrowsExponentiallyUpToTheCap() {
        let policy = RetryPolicy(maxAttempts: 10, initialBackoff: .milliseconds(100), maxBackoff: .seconds(1))
        #expect(policy.ceiling(afterAttempt: 1) == .milliseconds(100))
        #expect(policy.ceiling(afterAttempt: 2) == .milliseconds(200))
        #expect(policy.ceiling(afterAttempt: 4) == .milliseconds(800))
        #expect(policy.ceiling(afterAttempt: 5) == .seconds(1))
        #expect(policy.ceiling(afterAttempt: 60) == .seconds(1))
    }

    @Test func fullJitterStaysWithinTheCeilingAndVaries() {
        let policy = RetryPolicy(maxAttempts: 5, initialBackoff: .milliseconds(100), maxBackoff: .seconds(2))
        var generator = SystemRandomNumberGenerator()
        let waits = (0..<200).map { _ in policy.backoff(afterAttempt: 3, using: &generator) }
        #expect(waits.allSatisfy { $0 >= .zero && $0 <= .milliseconds(400) })
        #expect(Set(waits).count > 100)
    }

    @Test func transientFailuresAreRetriedUntilAttemptsRunOut() async throws {
        let policy = RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(1), maxBackoff: .milliseconds(2))
        var attempts = 0
        await #expect(throws: GamebaseError.self) {
            try await policy.run { attempt in
                attempts = attempt
                throw GamebaseError(code: .timeout, api: "consume", transactionID: "t", message: "slow")
            }
        }
        #expect(attempts == 3)
    }

    @Test func permanentFailuresAreNotRetried() async throws {
        let policy = RetryPolicy(maxAttempts: 5, initialBackoff: .milliseconds(1))
        var attempts = 0
        await #expect(throws: GamebaseError.self) {
            try await policy.run { attempt in
                attempts = attempt
                throw GamebaseError(
                    code: .resultCode, api: "consume", resultCode: .consumeFailed, transactionID: "t", message: "no")
            }
        }
        #expect(attempts == 1)
    }

    @Test func aLaterSuccessEndsTheRetries() async throws {
        let policy = RetryPolicy(maxAttempts: 5, initialBackoff: .milliseconds(1))
        let value = try await policy.run { attempt in
            if attempt < 3 { throw GamebaseError(code: .connection, api: "a", transactionID: "t", message: "down") }
            return attempt
        }
        #expect(value == 3)
    }
}

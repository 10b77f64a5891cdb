import Gamebase
import Wire
import Testing

@Suite struct GamebaseResultCodeTests {
    /// Every code of contract §8.1 with the class the consume flow acts on.
    static let table: [(Int, GamebaseFailureKind)] = [
        (5018, .alreadyConsumed),
        (5000, .permanent), (1100, .permanent), (5032, .permanent), (9999, .transient),
        (-4001002, .permanent),
        (-4000001, .permanent), (-4000006, .permanent), (-4000002, .permanent), (-4000004, .permanent),
        (-4000005, .permanent), (-4000003, .permanent), (-4000007, .configuration), (-4000008, .permanent),
        (-4010001, .configuration), (-4010002, .configuration), (-4010003, .configuration), (-4010004, .configuration),
        (-4060001, .configuration), (-4060002, .permanent), (-4060003, .configuration),
        (-4090001, .transient), (-4090002, .transient), (-4090003, .transient), (-4090004, .transient),
        (-4150001, .permanent),
        (-4010202, .configuration), (-4040201, .configuration), (-4040202, .configuration), (-4120201, .configuration),
        (-4040401, .permanent),
    ] + (1...15).map { (-5000000 - $0, GamebaseFailureKind.transient) } + (1...8).map { (-5000200 - $0, .transient) }

    @Test(arguments: table)
    func resultCodeIsClassifiedAsTheContractSays(code: Int, kind: GamebaseFailureKind) {
        #expect(GamebaseResultCode(code).failureKind == kind)
    }

    @Test(arguments: [
        (GamebaseError.Code.timeout, GamebaseFailureKind.transient), (.connection, .transient), (.httpStatus, .transient),
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

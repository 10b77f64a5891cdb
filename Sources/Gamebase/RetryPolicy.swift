/// Exponential backoff with full jitter and an attempt limit.
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts in all, the first included (1 = no retry).
    public var maxAttempts: Int
    public var initialBackoff: Duration
    public var maxBackoff: Duration

    public init(maxAttempts: Int = 4, initialBackoff: Duration = .milliseconds(200), maxBackoff: Duration = .seconds(5))
    {
        self.maxAttempts = max(1, maxAttempts)
        self.initialBackoff = initialBackoff
        self.maxBackoff = max(initialBackoff, maxBackoff)
    }

    /// The wait before attempt `attempt + 1` after `attempt` failed: uniformly random in
    /// `0 … min(maxBackoff, initialBackoff × 2^(attempt-1))` ("full jitter").
    public func backoff(afterAttempt attempt: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        let ceiling = self.ceiling(afterAttempt: attempt)
        let nanoseconds = Self.nanoseconds(ceiling)
        guard nanoseconds > 0 else { return .zero }
        return .nanoseconds(Int64.random(in: 0...nanoseconds, using: &generator))
    }

    /// The largest wait after `attempt` failed.
    public func ceiling(afterAttempt attempt: Int) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let grown = Self.nanoseconds(initialBackoff).multipliedReportingOverflow(by: Int64(1) << exponent)
        return grown.overflow ? maxBackoff : min(.nanoseconds(grown.partialValue), maxBackoff)
    }

    /// Runs `operation` until it succeeds, fails with an error `isRetryable` rejects, or attempts run out; then
    /// rethrows the last error. Cancellation ends the retries with `CancellationError`: an attempt cut short by
    /// it says nothing about the operation.
    ///
    /// - Parameter operation: receives the attempt number, from 1.
    public func run<T>(
        isRetryable: (any Error) -> Bool = { ($0 as? GamebaseError)?.isRetryable ?? false },
        onRetry: (_ attempt: Int, _ error: any Error, _ wait: Duration) -> Void = { _, _, _ in },
        _ operation: (_ attempt: Int) async throws -> T
    ) async throws -> T {
        var generator = SystemRandomNumberGenerator()
        var attempt = 1
        while true {
            do {
                return try await operation(attempt)
            } catch {
                try Task.checkCancellation()
                guard attempt < maxAttempts, isRetryable(error) else { throw error }
                let wait = backoff(afterAttempt: attempt, using: &generator)
                onRetry(attempt, error, wait)
                try await Task.sleep(for: wait)
                attempt += 1
            }
        }
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

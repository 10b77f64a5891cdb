import Fulfilment

/// How opening a PostgreSQL ledger waits for a database that cannot be reached yet (refused, timed out, not
/// resolvable, still starting). A database that answers but refuses the configuration is never retried.
public struct LedgerConnectRetry: Sendable, Hashable {
    /// Attempts in all; `nil`: until the database answers (or the task is cancelled).
    public var maxAttempts: Int?
    /// The wait after the first failed attempt; it doubles after each one, up to `maxBackoff`.
    public var initialBackoff: Duration
    public var maxBackoff: Duration

    public init(maxAttempts: Int?, initialBackoff: Duration = .milliseconds(500), maxBackoff: Duration = .seconds(30)) {
        self.maxAttempts = maxAttempts
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
    }

    /// One attempt: for commands that look into the ledger once (`check-config`, `ledger`, `reprocess`).
    public static let once = LedgerConnectRetry(maxAttempts: 1)
    /// Until the database answers, waiting 0.5 s, 1 s, 2 s … at most 30 s between attempts: for the daemon, which
    /// may start before its database.
    public static let untilConnected = LedgerConnectRetry(maxAttempts: nil)

    /// The wait after failed attempt `attempt` (1-based): exponential, capped, with up to a quarter taken off at
    /// random so workers started together do not knock in step.
    public func backoff(afterAttempt attempt: Int) -> Duration {
        let doublings = min(max(attempt - 1, 0), 30)
        var wait = initialBackoff
        for _ in 0..<doublings where wait < maxBackoff { wait *= 2 }
        wait = min(wait, maxBackoff)
        return wait - wait * Double.random(in: 0...0.25)
    }
}

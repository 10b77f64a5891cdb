import Fulfilment
import Wire

/// A token bucket: `rate` tokens a second, at most `capacity` kept. A value-type state machine; ``RateLimiter``
/// runs it behind a lock and does the waiting.
///
/// A reservation always succeeds and says how long to wait before using its token: the tokens can go below zero,
/// so callers waiting at once are served in turn, each `1 / rate` after the previous one.
struct TokenBucket: Sendable {
    let rate: Double
    let capacity: Double
    private var tokens: Double
    private var updated: ContinuousClock.Instant

    /// - Parameters:
    ///   - rate: tokens added per second (> 0).
    ///   - capacity: tokens kept at most (≥ 1): the burst allowed after a quiet period.
    ///   - full: start with `capacity` tokens; otherwise with one.
    init(rate: Double, capacity: Double = 1, full: Bool = true, now: ContinuousClock.Instant) {
        precondition(rate > 0 && capacity >= 1)
        self.rate = rate
        self.capacity = capacity
        self.tokens = full ? capacity : 1
        self.updated = now
    }

    /// Takes one token; returns how long to wait before using it (zero when one was there).
    mutating func reserve(now: ContinuousClock.Instant) -> Duration {
        if now > updated {
            let elapsed = now - updated
            let seconds = elapsed.seconds
            tokens = min(capacity, tokens + seconds * rate)
            updated = now
        }
        tokens -= 1
        guard tokens < 0 else { return .zero }
        return .nanoseconds(Int64((-tokens / rate * 1e9).rounded(.up)))
    }
}

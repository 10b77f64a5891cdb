import Fulfilment
import Synchronization

/// Paces calls: ``acquire()`` returns when the caller may make its call, never more than the bucket's rate.
final class RateLimiter: Sendable {
    private let bucket: Mutex<TokenBucket>
    private let clock: any WorkerClock

    /// - Parameter perSecond: calls a second at most, evenly spaced (a burst of one).
    init(perSecond: Double, clock: any WorkerClock) {
        self.clock = clock
        bucket = Mutex(TokenBucket(rate: perSecond, capacity: 1, now: clock.instant))
    }

    /// Waits for a token. Throws `CancellationError` when cancelled while waiting (the token is spent).
    func acquire() async throws {
        let now = clock.instant
        let wait = bucket.withLock { $0.reserve(now: now) }
        if wait > .zero { try await clock.sleep(for: wait) }
    }
}

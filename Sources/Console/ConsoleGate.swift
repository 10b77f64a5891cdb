import Synchronization

/// Work the console lets run at once: at most `limit` at a time, starts at least `interval` apart, the rest refused
/// at once (no queue: a page asked for again later is cheaper than a queue that grows while the ledger, Gamebase or
/// Kafka is slow). A holder leaves when its work really ends, past any deadline it was given.
final class ConsoleGate: Sendable {
    private let state = Mutex<(running: Int, lastStart: ContinuousClock.Instant?)>((0, nil))
    let limit: Int
    let interval: Duration

    init(limit: Int, interval: Duration = .zero) {
        self.limit = limit
        self.interval = interval
    }

    /// Whether work may start now; it then holds a place until ``leave()``.
    func enter(at now: ContinuousClock.Instant = .now) -> Bool {
        state.withLock { state in
            guard state.running < limit, state.lastStart.map({ now - $0 >= interval }) ?? true else { return false }
            state = (state.running + 1, now)
            return true
        }
    }

    func leave() {
        state.withLock { $0.running -= 1 }
    }
}

import DequeModule
import Synchronization

/// Counts free in-flight slots; `acquire` waits for one.
final class AsyncSemaphore: Sendable {
    private struct State {
        var available: Int
        var waiters = Deque<CheckedContinuation<Void, Never>>()
    }
    private let state: Mutex<State>

    init(_ count: Int) {
        state = Mutex(State(available: count))
    }

    func acquire() async {
        await withCheckedContinuation { continuation in
            let acquired = state.withLock { state -> Bool in
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if acquired { continuation.resume() }
        }
    }

    func release() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiters.popFirst() { return waiter }
            state.available += 1
            return nil
        }
        waiter?.resume()
    }
}

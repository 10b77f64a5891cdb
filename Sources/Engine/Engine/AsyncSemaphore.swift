import DequeModule
import Synchronization

/// A weighted semaphore for the engine's admission: free in-flight slots, or free bytes. `acquire` waits until
/// `weight` is free; a weight larger than the whole capacity is admitted once nothing else holds any, so one
/// oversized record still moves on (alone). Waiters are served in order.
final class AsyncSemaphore: Sendable {
    private struct Waiter {
        let weight: Int
        let continuation: CheckedContinuation<Void, Never>
    }
    private struct State {
        var available: Int
        var waiters = Deque<Waiter>()
    }
    private let state: Mutex<State>
    let capacity: Int

    init(_ capacity: Int) {
        self.capacity = max(1, capacity)
        state = Mutex(State(available: self.capacity))
    }

    /// The weight actually held for a request of `weight`: at most the whole capacity.
    func held(for weight: Int) -> Int { min(max(0, weight), capacity) }

    /// Waits until `weight` (at most the capacity) is free and takes it. Release the same `weight`.
    func acquire(_ weight: Int = 1) async {
        let weight = held(for: weight)
        // Free now (the usual case below the bound): taken without a continuation.
        let taken = state.withLock { state -> Bool in
            guard state.waiters.isEmpty, state.available >= weight else { return false }
            state.available -= weight
            return true
        }
        if taken { return }
        await withCheckedContinuation { continuation in
            let acquired = state.withLock { state -> Bool in
                if state.waiters.isEmpty, state.available >= weight {
                    state.available -= weight
                    return true
                }
                state.waiters.append(Waiter(weight: weight, continuation: continuation))
                return false
            }
            if acquired { continuation.resume() }
        }
    }

    func release(_ weight: Int = 1) {
        let weight = held(for: weight)
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.available += weight
            var ready: [CheckedContinuation<Void, Never>] = []
            while let first = state.waiters.first, state.available >= first.weight {
                state.available -= first.weight
                ready.append(state.waiters.removeFirst().continuation)
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }
}

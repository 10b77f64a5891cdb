import Dispatch
import Synchronization

/// Wakes every task waiting for "something changed" (a circuit closed, the ledger answers again). A waiter also
/// wakes after its timeout, or when its task is cancelled, so it can look again at what it waits for.
final class ChangeSignal: Sendable {
    private struct State {
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextID: UInt64 = 0
    }
    private let state = Mutex(State())

    /// Returns at the next ``signal()``, after `timeout`, or when the task is cancelled, whichever comes first.
    func wait(timeout: Duration) async {
        let id = state.withLock { state -> UInt64 in
            state.nextID &+= 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let cancelled = state.withLock { state -> Bool in
                    if Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if cancelled { return continuation.resume() }
                let (seconds, attoseconds) = timeout.components
                let nanoseconds = max(0, seconds) &* 1_000_000_000 &+ max(0, attoseconds / 1_000_000_000)
                DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanoseconds))) {
                    [self] in
                    resume(id)
                }
            }
        } onCancel: {
            resume(id)
        }
    }

    /// Wakes every waiter.
    func signal() {
        let waiters = state.withLock { state in
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    private func resume(_ id: UInt64) {
        state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
    }
}

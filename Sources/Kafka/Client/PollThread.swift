import Foundation
import Synchronization

/// A dedicated OS thread for librdkafka's blocking calls, so they never occupy Swift's cooperative pool.
final class PollThread: Sendable {
    private let finished = Mutex<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// Starts `body` on a new thread named `name`.
    init(name: String, body: @escaping @Sendable () -> Void) {
        let thread = Thread { [self] in
            body()
            let waiters = finished.withLock { state in
                state.done = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
        thread.name = name
        thread.start()
    }

    /// Waits until the body has returned.
    func join() async {
        await withCheckedContinuation { continuation in
            let done = finished.withLock { state in
                if !state.done { state.waiters.append(continuation) }
                return state.done
            }
            if done { continuation.resume() }
        }
    }
}

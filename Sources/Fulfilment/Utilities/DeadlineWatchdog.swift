import Synchronization

/// The operation did not finish within its deadline.
public struct DeadlineExceeded: Error, CustomStringConvertible {
    public let what: String
    public let limit: Duration
    public var description: String { "\(what) did not finish within \(limit)" }
}

/// Deadlines for operations that may ignore cancellation (a database call stuck on a connection that will never
/// answer): ``run(_:_:_:)`` returns the operation's result, or throws ``DeadlineExceeded`` once the limit has passed,
/// whatever the operation does.
///
/// The operation runs in a task of its own, so the caller is never held by it: at the deadline it is cancelled
/// and left to end on its own (its result, if it ever comes, is dropped). Only idempotent operations belong here,
/// since one that timed out may still complete later. One ticking task, alive only while calls are outstanding,
/// watches every deadline (to within ``resolution``).
public final class DeadlineWatchdog: Sendable {
    private struct Entry {
        let deadline: ContinuousClock.Instant
        let expire: @Sendable () -> Void
    }
    private struct State {
        var entries: [UInt64: Entry] = [:]
        var nextID: UInt64 = 0
        var ticking = false
    }
    private let state = Mutex(State())
    public let resolution: Duration

    public init(resolution: Duration = .milliseconds(100)) {
        self.resolution = resolution
    }

    public func run<T: Sendable>(
        _ limit: Duration, _ what: @autoclosure () -> String, _ operation: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let description = what()
        let pending = PendingResult<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                pending.arm(continuation)
                // Unstructured on purpose: a structured child would make the caller wait for an operation that may
                // never return, which is what the deadline is for.
                let task = Task {
                    let result: Result<T, any Error>
                    do { result = .success(try await operation()) } catch { result = .failure(error) }
                    pending.finish(result)
                }
                pending.setTask(task)
                let id = register(
                    Entry(deadline: .now + limit) {
                        task.cancel()
                        pending.finish(.failure(DeadlineExceeded(what: description, limit: limit)))
                    })
                pending.setCleanup { [self] in unregister(id) }
            }
        } onCancel: {
            pending.cancel()
        }
    }

    private func register(_ entry: Entry) -> UInt64 {
        let (id, startTicker) = state.withLock { state -> (UInt64, Bool) in
            state.nextID &+= 1
            state.entries[state.nextID] = entry
            defer { state.ticking = true }
            return (state.nextID, !state.ticking)
        }
        if startTicker { Task { await tick() } }
        return id
    }

    private func unregister(_ id: UInt64) {
        _ = state.withLock { $0.entries.removeValue(forKey: id) }
    }

    /// Expires what is due, until no call is outstanding.
    private func tick() async {
        while true {
            try? await Task.sleep(for: resolution)
            let now = ContinuousClock.now
            let expired = state.withLock { state -> [Entry]? in
                if state.entries.isEmpty {
                    state.ticking = false
                    return nil
                }
                let due = state.entries.filter { $0.value.deadline <= now }
                for id in due.keys { state.entries[id] = nil }
                return Array(due.values)
            }
            guard let expired else { return }
            for entry in expired { entry.expire() }
        }
    }
}

/// The one-time result of a deadline-bound call: the first of result, expiry and cancellation wins.
private final class PendingResult<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var task: Task<Void, Never>?
        var cleanup: (@Sendable () -> Void)?
        var done = false
        var cancelled = false
    }
    private let state = Mutex(State())

    func arm(_ continuation: CheckedContinuation<T, any Error>) {
        // Cancelled before the call even started: nothing else will resume it.
        let alreadyDone = state.withLock { state -> Bool in
            if !state.done { state.continuation = continuation }
            return state.done
        }
        if alreadyDone { continuation.resume(throwing: CancellationError()) }
    }

    func setTask(_ task: Task<Void, Never>) {
        let cancelNow = state.withLock { state -> Bool in
            state.task = task
            return state.cancelled
        }
        if cancelNow { task.cancel() }
    }

    func setCleanup(_ cleanup: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            if state.done { return true }
            state.cleanup = cleanup
            return false
        }
        if runNow { cleanup() }
    }

    func finish(_ result: Result<T, any Error>) {
        let (continuation, cleanup) = state.withLock {
            state -> (CheckedContinuation<T, any Error>?, (@Sendable () -> Void)?) in
            guard !state.done else { return (nil, nil) }
            state.done = true
            defer {
                state.continuation = nil
                state.cleanup = nil
            }
            return (state.continuation, state.cleanup)
        }
        cleanup?()
        continuation?.resume(with: result)
    }

    func cancel() {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
        finish(.failure(CancellationError()))
    }
}

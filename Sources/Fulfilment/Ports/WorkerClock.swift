import Foundation

/// The time the engine and its services read, and the waits they make: the system's in the daemon, a test clock in
/// tests, so timing behaviour is tested without waiting for it.
public protocol WorkerClock: Sendable {
    /// Wall-clock time: what is stamped into records and compared with stored times.
    var now: Date { get }
    /// A monotonic reading, for intervals and deadlines (it never jumps with the wall clock).
    var instant: ContinuousClock.Instant { get }
    /// Waits for `duration`; throws `CancellationError` when the task is cancelled first.
    func sleep(for duration: Duration) async throws
}

/// The system's clock: `Date()`, `ContinuousClock` and `Task.sleep`.
public struct SystemClock: WorkerClock {
    public init() {}
    public var now: Date { Date() }
    public var instant: ContinuousClock.Instant { .now }
    public func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
}

extension WorkerClock where Self == SystemClock {
    /// The system's clock.
    public static var system: SystemClock { SystemClock() }
}

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
    /// The wall time a stored stamp must be before to be at least `age` old: `now - age`, held back by a forward
    /// step of the wall clock seen within the last `age` (``WallClockSteps``), so a step never makes a young row
    /// look old. Every comparison of a stored time with a window (a grace, a retention) reads this, not `now`.
    func wallCutoff(olderThan age: Duration) -> Date
    /// The steps of this clock's wall time seen so far.
    var wallSteps: WallClockSteps { get }
    /// Both clocks read together, with how far apart the monotonic readings around the wall one lay. Called under
    /// ``WallClockSteps``'s lock: it must not read a cutoff itself.
    func clockReading() -> (wall: Date, instant: ContinuousClock.Instant, spread: Duration)
}

extension WorkerClock {
    public func wallCutoff(olderThan age: Duration) -> Date {
        wallSteps.cutoff(olderThan: age, reading: clockReading)
    }
}

/// The system's clock: `Date()`, `ContinuousClock` and `Task.sleep`; its steps are the process's
/// (``WallClockSteps/system``).
public struct SystemClock: WorkerClock {
    public init() {}
    public var now: Date { Date() }
    public var instant: ContinuousClock.Instant { .now }
    public func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
    public var wallSteps: WallClockSteps { .system }
    public func clockReading() -> (wall: Date, instant: ContinuousClock.Instant, spread: Duration) {
        WallClockSteps.systemReading()
    }
}

extension WorkerClock where Self == SystemClock {
    /// The system's clock.
    public static var system: SystemClock { SystemClock() }
}

import Foundation
import Fulfilment
import Synchronization

/// A clock that moves only when a test says so: ``advance(by:)`` resumes every sleeper whose time has come, in order of
/// their deadlines. Timing behaviour (intervals, leases, first passes, probe cadences) is tested without waiting for it.
///
/// ``sleepers(atLeast:)`` waits until that many tasks are asleep on it, so a test advances the clock only once the
/// service it drives has reached its wait.
///
/// Made with `sleepsAdvance: true`, a sleep moves the clock by its own length and returns at once: code that paces
/// itself (a rate limiter) runs in no real time, while the test still moves the clock past a grace or an interval.
public final class TestClock: WorkerClock {
    private struct Sleeper {
        let id: UInt64
        let deadline: Duration
        let continuation: CheckedContinuation<Void, any Error>
    }
    private struct State {
        var offset: Duration = .zero
        /// How far the wall clock was stepped (``stepWall(by:)``), apart from the monotonic time.
        var wallStep: Duration = .zero
        var sleepers: [Sleeper] = []
        var nextID: UInt64 = 0
        /// Sleepers cancelled before they were registered.
        var cancelled: Set<UInt64> = []
    }
    private let state = Mutex(State())
    private let startDate: Date
    private let startInstant: ContinuousClock.Instant
    private let sleepsAdvance: Bool
    public let wallSteps: WallClockSteps

    /// - Parameters:
    ///   - now: the wall-clock time the clock starts at.
    ///   - sleepsAdvance: whether a sleep moves the clock by its length and returns at once, instead of waiting for
    ///     the test to advance it.
    public init(now: Date = Date(timeIntervalSince1970: 1_800_000_000), sleepsAdvance: Bool = false) {
        startDate = now
        startInstant = .now
        self.sleepsAdvance = sleepsAdvance
        wallSteps = WallClockSteps(wall: now, instant: startInstant)
    }

    public var now: Date { startDate.addingTimeInterval(state.withLock { $0.offset + $0.wallStep }.secondsValue) }

    public func clockReading() -> (wall: Date, instant: ContinuousClock.Instant, spread: Duration) {
        state.withLock { state in
            (
                startDate.addingTimeInterval((state.offset + state.wallStep).secondsValue), startInstant + state.offset,
                .zero
            )
        }
    }

    /// Steps the wall clock by `duration` (back when negative), as NTP or an operator does: ``now`` jumps, the
    /// monotonic ``instant`` and the sleepers do not.
    public func stepWall(by duration: Duration) {
        state.withLock { $0.wallStep += duration }
    }

    public var instant: ContinuousClock.Instant { startInstant + state.withLock { $0.offset } }

    /// How far the clock has moved since it was made.
    public var elapsed: Duration { state.withLock { $0.offset } }

    public func sleep(for duration: Duration) async throws {
        try Task.checkCancellation()
        if sleepsAdvance {
            if duration > .zero { advance(by: duration) }
            return
        }
        let id = state.withLock { state -> UInt64 in
            state.nextID &+= 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resume = state.withLock { state -> Result<Void, any Error>? in
                    if state.cancelled.remove(id) != nil { return .failure(CancellationError()) }
                    if duration <= .zero { return .success(()) }
                    state.sleepers.append(
                        Sleeper(id: id, deadline: state.offset + duration, continuation: continuation))
                    return nil
                }
                if let resume { continuation.resume(with: resume) }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward and wakes every sleeper whose deadline is now past, earliest first.
    public func advance(by duration: Duration) {
        let due = state.withLock { state -> [Sleeper] in
            state.offset += duration
            let due = state.sleepers.filter { $0.deadline <= state.offset }.sorted { $0.deadline < $1.deadline }
            state.sleepers.removeAll { $0.deadline <= state.offset }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// When the earliest sleeper wakes, as time since the clock was made (`nil` with none asleep): what a service's
    /// wait asked for, whatever the test does next.
    public var nextDeadline: Duration? { state.withLock { $0.sleepers.map(\.deadline).min() } }

    /// Tasks asleep on the clock now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// Waits (in real time, yielding) until at least `count` tasks sleep on the clock; fails after `timeout`.
    public func sleepers(atLeast count: Int, timeout: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + timeout
        while sleeperCount < count {
            guard ContinuousClock.now < deadline else {
                throw TestSetupError(message: "fewer than \(count) sleepers on the test clock after \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Advances in steps of `step` until `condition` holds, letting woken tasks run between steps (at most `limit`).
    public func advance(
        by step: Duration, until condition: @Sendable () async throws -> Bool, limit: Duration = .seconds(3_600)
    ) async throws {
        var moved = Duration.zero
        while try await !condition() {
            guard moved < limit else {
                throw TestSetupError(message: "the condition did not hold within \(limit) of test-clock time")
            }
            advance(by: step)
            moved += step
            for _ in 0..<20 { await Task.yield() }
            try await Task.sleep(for: .milliseconds(1))
        }
    }
}

extension Duration {
    fileprivate var secondsValue: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

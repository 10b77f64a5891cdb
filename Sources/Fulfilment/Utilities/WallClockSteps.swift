import Foundation
import Synchronization
import Wire

/// The steps of the wall clock, seen by reading it beside the monotonic one: an NTP correction that steps, a VM
/// resumed after hours, an operator's `date -s`. Stored times are stamped with the wall clock, so a step forward makes
/// every stamp written before it look older by the step — a grace cut short, a row pruned before its window.
///
/// ``cutoff(olderThan:reading:)`` is the answer: the wall time a stamp must be before to be at least `age` old, held
/// back by every forward step seen within the last `age` of monotonic time. Once `age` has passed since a step,
/// every stamp from before it is older than `age` in fact, and the cutoff is the wall clock's again.
///
/// A step back makes earlier stamps look younger: what waits on them waits up to the step longer, never less. (A
/// stamp cannot say on which side of a backward step it was written, so this cannot be undone without a
/// sequence the rows do not have.) The hold-back is this process's: a step before it started, or one another
/// instance's clock made, is not known here.
public final class WallClockSteps: Sendable {
    /// One step: how far the wall clock moved against the monotonic one (positive forward), and when it was seen.
    public struct Step: Sendable, Equatable {
        public let seconds: Double
        public let seenAt: ContinuousClock.Instant
        /// The wall clock's reading just after the step was seen.
        public let wallAfter: Date
    }

    /// A reading further off the monotonic clock than this is a step. On Linux an NTP slew moves the monotonic
    /// clock with the wall clock, so only a step separates them; a second is far beyond scheduling noise.
    public static let tolerance: Double = 1
    /// A reading whose two monotonic readings, taken around the wall clock's, lie further apart than this (the
    /// thread was preempted between them) says nothing about the wall clock: it is skipped.
    static let readingSpread: Duration = .milliseconds(100)
    /// Forward steps kept for cutoffs; beyond this the two oldest are merged into one (as large as both, seen when
    /// the later was), which holds back no less.
    static let keptForward = 256
    /// Steps of either direction kept for ``steps(after:)``.
    static let keptForReport = 64

    private struct State {
        var lastWall: Date
        var lastInstant: ContinuousClock.Instant
        /// Forward steps, oldest first: what cutoffs are held back by.
        var forward: [Step] = []
        /// Recent steps of either direction, for the reporter.
        var recent: [Step] = []
        /// Steps seen since the start; ``steps(after:)`` reads them by number.
        var seen = 0
    }
    private let state: Mutex<State>

    public init(wall: Date, instant: ContinuousClock.Instant) {
        state = Mutex(State(lastWall: wall, lastInstant: instant))
    }

    /// The system clock's steps: one per process, as the clock is.
    public static let system = WallClockSteps(wall: Date(), instant: .now)

    /// The system's clocks read together: the monotonic one before and after the wall clock, so a reading cut in two
    /// by the scheduler can be told.
    public static func systemReading() -> (wall: Date, instant: ContinuousClock.Instant, spread: Duration) {
        let before = ContinuousClock.now
        let wall = Date()
        let after = ContinuousClock.now
        return (wall, after, after - before)
    }

    /// Reads the clocks (under the lock, so readings are compared in the order they were taken) and compares them
    /// with the last reading; records a step when they moved apart.
    @discardableResult
    public func observe(reading: () -> (wall: Date, instant: ContinuousClock.Instant, spread: Duration)) -> Step? {
        state.withLock { Self.observe(reading(), &$0) }
    }

    private static func observe(
        _ reading: (wall: Date, instant: ContinuousClock.Instant, spread: Duration), _ state: inout State
    ) -> Step? {
        guard reading.spread <= readingSpread, reading.instant >= state.lastInstant else { return nil }
        let drift = reading.wall.timeIntervalSince(state.lastWall) - (reading.instant - state.lastInstant).seconds
        state.lastWall = reading.wall
        state.lastInstant = reading.instant
        guard abs(drift) > tolerance else { return nil }
        let step = Step(seconds: drift, seenAt: reading.instant, wallAfter: reading.wall)
        state.recent.append(step)
        if state.recent.count > keptForReport { state.recent.removeFirst() }
        state.seen += 1
        if drift > 0 {
            state.forward.append(step)
            if state.forward.count > keptForward {
                let (oldest, next) = (state.forward[0], state.forward[1])
                state.forward.replaceSubrange(
                    0...1,
                    with: [Step(seconds: oldest.seconds + next.seconds, seenAt: next.seenAt, wallAfter: next.wallAfter)]
                )
            }
        }
        return step
    }

    /// The wall time before which a stamp is at least `age` old: the wall clock less `age`, less the forward steps
    /// seen within the last `age`. The clocks are read (and a step recorded) first, under the same lock.
    public func cutoff(
        olderThan age: Duration, reading: () -> (wall: Date, instant: ContinuousClock.Instant, spread: Duration)
    ) -> Date {
        state.withLock { state in
            let now = reading()
            // A reading too torn to record a step from is still held back by how far it lies ahead of the last one:
            // a preempted reading can only understate a forward drift.
            let unrecorded =
                now.spread > Self.readingSpread && now.instant >= state.lastInstant
                ? max(0, now.wall.timeIntervalSince(state.lastWall) - (now.instant - state.lastInstant).seconds) : 0
            _ = Self.observe(now, &state)
            let ahead = state.forward.reduce(unrecorded) { sum, step in
                now.instant - step.seenAt < age ? sum + step.seconds : sum
            }
            return now.wall.addingTimeInterval(-age.seconds - ahead)
        }
    }

    /// The steps seen after the first `count` (the number a reporter has read so far), and the new count.
    public func steps(after count: Int) -> (steps: [Step], count: Int) {
        state.withLock { state in
            let new = min(max(0, state.seen - count), state.recent.count)
            return (Array(state.recent.suffix(new)), state.seen)
        }
    }
}

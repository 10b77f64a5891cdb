import Foundation
import Synchronization
import Wire

/// The steps of the wall clock, seen by reading it beside the monotonic one: an NTP correction, a VM resumed after
/// hours, an operator's `date -s`. Stored times are stamped with the wall clock, so a step forward makes every stamp
/// written before it look older by the step — a grace cut short, a row pruned before its window, a lease ended early.
///
/// ``cutoff(olderThan:wall:instant:)`` is the answer: the wall time a stamp must be before to be at least `age` old,
/// held back by every forward step seen within the last `age` of monotonic time. Once `age` has passed since a step,
/// every stamp from before it is older than `age` in fact, and the cutoff is the wall clock's again.
///
/// A step back makes earlier stamps look younger: what waits on them waits up to the step longer, never less. (A
/// stamp cannot say on which side of a backward step it was written, so this cannot be undone without a
/// sequence the rows do not have.)
public final class WallClockSteps: Sendable {
    /// One step: how far the wall clock moved against the monotonic one (positive forward), and when it was seen.
    public struct Step: Sendable, Equatable {
        public let seconds: Double
        public let seenAt: ContinuousClock.Instant
        /// The wall clock's reading just after the step was seen.
        public let wallAfter: Date
    }

    /// A reading further off the monotonic clock than this (plus ``slewAllowance`` of the time since the last
    /// reading) is a step: NTP slews a clock by at most 500 ppm, and a second is far beyond scheduling noise.
    public static let tolerance: Double = 1
    public static let slewAllowance: Double = 0.001
    /// Steps remembered for cutoffs; the oldest go first (each counts only within its window anyway).
    static let remembered = 64

    private struct State {
        var lastWall: Date
        var lastInstant: ContinuousClock.Instant
        var steps: [Step] = []
        /// Steps seen since the start, in order; ``steps(after:)`` reads them by number.
        var seen = 0
    }
    private let state: Mutex<State>

    public init(wall: Date, instant: ContinuousClock.Instant) {
        state = Mutex(State(lastWall: wall, lastInstant: instant))
    }

    /// The system clock's steps: one per process, as the clock is.
    public static let system = WallClockSteps(wall: Date(), instant: .now)

    /// Compares a reading of both clocks with the last one; a step is recorded when they moved apart.
    @discardableResult
    public func observe(wall: Date, instant: ContinuousClock.Instant) -> Step? {
        state.withLock { state in
            let monotonic = (instant - state.lastInstant).seconds
            // Readings from two threads can arrive out of order: an older instant says nothing new.
            guard monotonic >= 0 else { return nil }
            let drift = wall.timeIntervalSince(state.lastWall) - monotonic
            state.lastWall = wall
            state.lastInstant = instant
            guard abs(drift) > Self.tolerance + monotonic * Self.slewAllowance else { return nil }
            let step = Step(seconds: drift, seenAt: instant, wallAfter: wall)
            state.steps.append(step)
            if state.steps.count > Self.remembered { state.steps.removeFirst() }
            state.seen += 1
            return step
        }
    }

    /// The wall time before which a stamp is at least `age` old: `wall - age`, less the forward steps seen within
    /// the last `age`. Reads the clocks for steps first.
    public func cutoff(olderThan age: Duration, wall: Date, instant: ContinuousClock.Instant) -> Date {
        observe(wall: wall, instant: instant)
        let ahead = state.withLock { state in
            state.steps.reduce(0.0) { sum, step in
                step.seconds > 0 && instant - step.seenAt < age ? sum + step.seconds : sum
            }
        }
        return wall.addingTimeInterval(-age.seconds - ahead)
    }

    /// The steps seen after the first `count` (the number a reporter has read so far), and the new count.
    public func steps(after count: Int) -> (steps: [Step], count: Int) {
        state.withLock { state in
            let new = min(max(0, state.seen - count), state.steps.count)
            return (Array(state.steps.suffix(new)), state.seen)
        }
    }
}

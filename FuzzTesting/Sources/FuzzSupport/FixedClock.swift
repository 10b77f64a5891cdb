import Foundation
import Fulfilment

/// The flow's clock in a fuzz run: the input's time, whatever it is (any `Int64` of milliseconds), stamped into every
/// record. The flow never waits on it; a wait, should one come, is the system's. It never steps: a cutoff is its time
/// less the window.
struct FixedClock: WorkerClock {
    let now: Date

    var instant: ContinuousClock.Instant { .now }

    func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }

    func wallCutoff(olderThan age: Duration) -> Date {
        now.addingTimeInterval(-Double(age.components.seconds) - Double(age.components.attoseconds) / 1e18)
    }

    var wallSteps: WallClockSteps { WallClockSteps(wall: now, instant: instant) }

    func clockReading() -> (wall: Date, instant: ContinuousClock.Instant, spread: Duration) { (now, instant, .zero) }
}

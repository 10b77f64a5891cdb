import Foundation
import Fulfilment

/// The flow's clock in a fuzz run: the input's time, whatever it is (any `Int64` of milliseconds), stamped into every
/// record. The flow never waits on it; a wait, should one come, is the system's.
struct FixedClock: WorkerClock {
    let now: Date

    var instant: ContinuousClock.Instant { .now }

    func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
}

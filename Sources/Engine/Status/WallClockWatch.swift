import Foundation
import Fulfilment
import Logging
import ServiceLifecycle
import Synchronization
import Wire

/// Reads the wall clock beside the monotonic one every second, so a step is seen within a second of happening (the
/// cutoffs that read ``WallClockSteps`` are held back from then on), and says so: a warning with the step's size
/// and `iap_wall_clock_steps_total{direction}`.
///
/// Nothing else is to be done about a step: every duration the worker waits is measured on the monotonic clock,
/// and every stored time it compares with a window goes through ``WorkerClock/wallCutoff(olderThan:)``.
public final class WallClockWatch: Service {
    let clock: any WorkerClock
    let metrics: any EngineMetrics
    let logger: Logger
    /// Steps reported so far (their count in ``WallClockSteps``).
    private let reported = Mutex(0)

    public init(clock: any WorkerClock, metrics: any EngineMetrics, logger: Logger) {
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
    }

    public func run() async throws {
        await runPeriodically(every: .seconds(1), on: clock) { self.check() }
    }

    /// Reads the clocks once and reports the steps seen since the last check (by this or by a cutoff); returns them.
    @discardableResult
    public func check() -> [WallClockSteps.Step] {
        clock.wallSteps.observe(reading: clock.clockReading)
        let steps = reported.withLock { reported in
            let (steps, count) = clock.wallSteps.steps(after: reported)
            reported = count
            return steps
        }
        for step in steps {
            let forward = step.seconds > 0
            metrics.countWallClockStep(forward: forward)
            logger.warning(
                forward
                    ? "the wall clock stepped forward; windows over stored times are held back by the step"
                    : "the wall clock stepped back; waits on times stored before it last up to the step longer",
                metadata: [
                    "clock.step_seconds": "\((step.seconds * 1000).rounded() / 1000)",
                    "clock.now": "\(RFC3339.string(step.wallAfter))",
                ])
        }
        return steps
    }
}

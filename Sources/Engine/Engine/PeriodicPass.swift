import Fulfilment
import ServiceLifecycle

/// The loop of the services that work in passes (sweeper, Apple history poller, consumption answerer): a pass, then
/// `interval` on `clock`, until graceful shutdown or cancellation (a wait cut short ends the loop).
func runPeriodically(
    every interval: Duration, on clock: any WorkerClock, _ pass: @escaping @Sendable () async -> Void
) async {
    await cancelWhenGracefulShutdown {
        while !Task.isCancelled {
            await pass()
            do { try await clock.sleep(for: interval) } catch { return }
        }
    }
}

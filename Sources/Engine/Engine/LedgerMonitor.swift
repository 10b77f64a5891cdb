import Foundation
import Fulfilment
import Logging
import Synchronization

/// Treats the ledger as a dependency like Gamebase: when ledger calls fail and a probe confirms the ledger does not
/// answer, intake pauses (not ready, nothing dead-lettered), purchases wait, and ``run()`` probes every
/// `probeInterval` until it answers again; then everything resumes by itself.
public final class LedgerMonitor: Sendable {
    private let probeInterval: Duration
    private let metrics: any EngineMetrics
    private let health: WorkerHealth
    private let clock: any WorkerClock
    private let logger: Logger
    /// Called after every transition, outside the locks, with whether intake must be held (paused) now.
    private let onTransition: @Sendable (_ holdIntake: Bool) -> Void
    private let unavailable = Mutex(false)
    private let changed = ChangeSignal()
    /// One probe for every purchase whose ledger call failed meanwhile: a failed batch fails hundreds of purchases
    /// at once, and hundreds of probes would queue for the ledger's connections and time out by themselves.
    private let probes: Coalescer<Void, Bool>

    /// - Parameter ledger: its probe is ``SweepLedger/countUnconsumed()``, which fails when the ledger cannot take writes.
    public init(
        ledger: any SweepLedger, probeInterval: Duration = .seconds(1), probeDeadline: Duration = .seconds(3),
        metrics: any EngineMetrics, health: WorkerHealth, clock: any WorkerClock = .system, logger: Logger,
        onTransition: @escaping @Sendable (_ holdIntake: Bool) -> Void
    ) {
        self.probeInterval = probeInterval
        self.clock = clock
        let deadline = LedgerDeadline(probeDeadline)
        probes = Coalescer(maxBatch: .max) { [metrics] calls in
            let answered: Bool
            do {
                let count = try await deadline.run("ledger probe") { try await ledger.countUnconsumed() }
                metrics.setUnconsumedGrants(count)
                answered = true
            } catch {
                answered = false
            }
            return Array(repeating: answered, count: calls.count)
        }
        self.metrics = metrics
        self.health = health
        self.logger = logger
        self.onTransition = onTransition
    }

    public var isAvailable: Bool { !unavailable.withLock { $0 } }

    /// After a ledger call of a purchase failed: is the ledger down (so the purchase must wait, not count a
    /// failure)? Probes the ledger unless it is known to be down already.
    public func isOutage(after error: any Error) async -> Bool {
        if !isAvailable { return true }
        guard error is LedgerError else { return false }
        if await answers() { return false }
        markUnavailable(because: error)
        return true
    }

    /// Reports a failure seen outside a purchase (the sweeper): the same check as ``isOutage(after:)``.
    public func reportFailure(_ error: any Error) async {
        _ = await isOutage(after: error)
    }

    /// Waits until the ledger answers; throws `CancellationError` when the task is cancelled or `stillWanted`
    /// turns false.
    public func waitUntilAvailable(stillWanted: @Sendable () -> Bool) async throws {
        while true {
            try Task.checkCancellation()
            guard stillWanted() else { throw CancellationError() }
            if isAvailable { return }
            await changed.wait(timeout: .milliseconds(500))
        }
    }

    /// Probes while the ledger is down; idles otherwise. Ends when the task is cancelled.
    public func run() async {
        while !Task.isCancelled {
            if isAvailable {
                await changed.wait(timeout: .seconds(1))
                continue
            }
            if await answers() {
                markAvailable()
                continue
            }
            do { try await clock.sleep(for: probeInterval) } catch { return }
        }
    }

    private func answers() async -> Bool {
        (try? await probes.submit(())) ?? false
    }

    private func markUnavailable(because error: any Error) {
        let changedNow = unavailable.withLock { value -> Bool in
            defer { value = true }
            return !value
        }
        guard changedNow else { return }
        logger.error(
            "the ledger does not answer: intake paused, purchases wait (nothing is dead-lettered); probing every \(probeInterval)",
            metadata: ["ledger.error": "\(error)"])
        metrics.setLedgerUnavailable(true)
        health.setLedgerReachable(false)
        onTransition(!isAvailable)
        changed.signal()
    }

    private func markAvailable() {
        let changedNow = unavailable.withLock { value -> Bool in
            defer { value = false }
            return value
        }
        guard changedNow else { return }
        logger.notice("the ledger answers again: intake resumed")
        metrics.setLedgerUnavailable(false)
        health.setLedgerReachable(true)
        onTransition(!isAvailable)
        changed.signal()
    }
}

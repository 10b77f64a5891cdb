import Foundation
import Fulfilment
import Gamebase
import Logging
import Synchronization

/// Owns the verdict on Gamebase for the engine: the ``CircuitBreaker``, the health probes that open and close it,
/// and the purchases waiting for it.
///
/// One prober decides. Purchases only wait while the circuit is open or stopped; while it is, ``run()`` probes
/// Gamebase every `probeInterval` with a call that depends on no purchase (``GamebaseAPI/probe(transactionID:)``),
/// and the first answer closes it. When a purchase keeps failing while the circuit is closed, ``verdictAfterFailure()``
/// asks the prober whether Gamebase answers: if it does, the purchase is the problem (it is dead-lettered); if not,
/// the circuit opens and the purchase waits with the others.
///
/// While stopped by a configuration failure (a wrong secret key), each probe first re-reads the secret key file
/// (`reloadSecretKey`), so fixing the mounted secret resumes the worker by itself.
public final class GamebaseMonitor: Sendable {
    private let gamebase: any GamebaseAPI
    private let breaker: Mutex<CircuitBreaker>
    private let probeInterval: Duration
    /// A probe verdict younger than this answers ``verdictAfterFailure()`` without a new call.
    private let verdictMaxAge: Duration
    private let reloadSecretKey: @Sendable () -> Void
    private let metrics: any EngineMetrics
    private let health: WorkerHealth
    private let clock: any WorkerClock
    private let logger: Logger
    /// Called after every transition, outside the locks, with whether intake must be held (paused) now.
    private let onTransition: @Sendable (_ holdIntake: Bool) -> Void
    private let changed = ChangeSignal()

    private struct ProbeState {
        var last: (verdict: GamebaseProbeVerdict, at: ContinuousClock.Instant)?
        /// Callers waiting for the probe under way; `nil` when none is.
        var waiting: [CheckedContinuation<GamebaseProbeVerdict?, Never>]?
    }
    private let probes = Mutex(ProbeState())

    public init(
        gamebase: any GamebaseAPI, configuration: CircuitBreaker.Configuration,
        verdictMaxAge: Duration = .milliseconds(250), reloadSecretKey: @escaping @Sendable () -> Void = {},
        metrics: any EngineMetrics, health: WorkerHealth, clock: any WorkerClock = .system, logger: Logger,
        onTransition: @escaping @Sendable (_ holdIntake: Bool) -> Void
    ) {
        self.clock = clock
        self.gamebase = gamebase
        self.breaker = Mutex(CircuitBreaker(configuration: configuration))
        self.probeInterval = configuration.probeInterval
        self.verdictMaxAge = verdictMaxAge
        self.reloadSecretKey = reloadSecretKey
        self.metrics = metrics
        self.health = health
        self.logger = logger
        self.onTransition = onTransition
    }

    public var allowsCalls: Bool { breaker.withLock { $0.allowsCalls } }
    public var isStopped: Bool { breaker.withLock { $0.isStopped } }

    /// Waits until purchases may call Gamebase. Throws `CancellationError` when the task is cancelled or
    /// `stillWanted` says the purchase is no longer this worker's (looked at whenever anything changes, and at
    /// least twice a second).
    public func waitUntilCallsAllowed(stillWanted: @Sendable () -> Bool) async throws {
        while true {
            try Task.checkCancellation()
            guard stillWanted() else { throw CancellationError() }
            if allowsCalls { return }
            await changed.wait(timeout: .milliseconds(500))
        }
    }

    /// Records one purchase's verdict on Gamebase (once per purchase).
    public func recordPurchase(failed: Bool) {
        let now = clock.instant
        apply(breaker.withLock { $0.record(failed: failed, now: now) })
    }

    /// A purchase's call was refused as a configuration failure.
    public func configurationRejected(_ error: GamebaseError) {
        apply(breaker.withLock { $0.configurationRejected(error) })
    }

    /// After a purchase failed transiently through all its attempts: does Gamebase answer? Uses a fresh probe's
    /// verdict, or runs one (callers arriving meanwhile share it), and applies it to the breaker.
    public func verdictAfterFailure() async -> GamebaseProbeVerdict {
        let now = clock.instant
        if let last = probes.withLock({ $0.last }), now - last.at < verdictMaxAge { return last.verdict }
        return await probe()
    }

    /// Probes while the circuit is open or stopped; idles while it is closed. Ends when the task is cancelled.
    public func run() async {
        while !Task.isCancelled {
            if allowsCalls {
                await changed.wait(timeout: .seconds(1))
                continue
            }
            if isStopped { reloadSecretKey() }
            _ = await probe()
            if allowsCalls { continue }
            do { try await clock.sleep(for: probeInterval) } catch { return }
        }
    }

    /// Runs one probe (or joins the one under way) and applies its verdict.
    private func probe() async -> GamebaseProbeVerdict {
        // The first caller leads (its continuation is resumed with nil at once); later ones wait for its verdict.
        let joined: GamebaseProbeVerdict? = await withCheckedContinuation { continuation in
            let leads = probes.withLock { state -> Bool in
                guard state.waiting != nil else {
                    state.waiting = []
                    return true
                }
                state.waiting!.append(continuation)
                return false
            }
            if leads { continuation.resume(returning: nil) }
        }
        if let joined { return joined }
        let verdict = await gamebase.probe(transactionID: GamebaseTransactionID())
        let now = clock.instant
        let waiting = probes.withLock { state in
            state.last = (verdict, now)
            defer { state.waiting = nil }
            return state.waiting ?? []
        }
        apply(
            breaker.withLock { breaker -> CircuitBreaker.Transition? in
                switch verdict {
                case .answers: breaker.probeAnswered()
                case .misconfigured(let error): breaker.configurationRejected(error)
                case .unavailable: breaker.probeFailed()
                }
            })
        if case .unavailable(let error) = verdict {
            logger.debug("Gamebase health probe failed", metadata: ["gamebase.error": "\(error.message)"])
        }
        for continuation in waiting { continuation.resume(returning: verdict) }
        return verdict
    }

    /// The effects of a transition: one log line, the metrics, readiness, intake, and the waiting purchases.
    private func apply(_ transition: CircuitBreaker.Transition?) {
        guard let transition else { return }
        switch transition {
        case .opened:
            logger.error(
                "Gamebase does not answer: circuit open, purchases wait and partitions are paused; probing every \(probeInterval)"
            )
            metrics.setCircuitOpen(true)
            health.setCircuitOpen(true)
        case .closed:
            logger.notice("Gamebase answers again: circuit closed, partitions resumed")
            metrics.setCircuitOpen(false)
            health.setCircuitOpen(false)
        case .stopped(let error):
            logger.critical(
                "Gamebase rejects the worker's configuration: consumption stopped, nothing committed; probing every \(probeInterval) and resuming once the configuration is accepted (check gamebase.app_id and the secret key)",
                metadata: [
                    "gamebase.result_code": "\(error.resultCode?.description ?? "-")", "gamebase.api": "\(error.api)",
                    "gamebase.error": "\(error.message)",
                ])
            metrics.setStopped(true)
            metrics.setCircuitOpen(false)
            health.setCircuitOpen(false)
            health.setStopped("Gamebase configuration failure (resultCode \(error.resultCode?.description ?? "-"))")
        case .resumed:
            logger.notice("Gamebase accepts the worker's configuration again: consumption resumed")
            metrics.setStopped(false)
            health.setStopped(nil)
        }
        onTransition(!allowsCalls)
        changed.signal()
    }
}

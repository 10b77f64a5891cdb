import Foundation
import Fulfilment
import Logging
import ServiceLifecycle
import Wire

/// Closes the gap of a payment whose purchase message never came (the game crashed or lost its network between
/// the payment and its report): every `reconcile.interval_ms` it runs a ``ReconcilePass`` over the users the ledger
/// saw in the last `reconcile.lookback_hours`, claiming each user first so instances sharing a PostgreSQL ledger
/// check a user once per interval.
///
/// Passes never overlap: a pass that has not checked every due user when the next interval starts ends there, says
/// so (one warning, `iap_reconcile_overruns_total`), and the next pass starts at once with the users it left,
/// which wait longest. It calls Gamebase only while the worker's circuit is closed, and uses the ledger only while
/// it answers (``ReconcileHealth``).
public struct Reconciler: Service {
    /// `reconcile.*`.
    public struct Configuration: Sendable, Hashable {
        /// Between the starts of two passes; `.zero` turns reconciliation off.
        public var interval: Duration
        /// How long a payment must stay unconsumed and ungranted, from the pass that first saw it, before a pass
        /// takes it.
        public var grace: Duration
        /// Users with a grant (or a rejection Gamebase confirmed as theirs) this recent are reconciled.
        public var lookback: Duration
        /// Gamebase calls a second by this instance's reconciler at most (List Consumables, Get Payment Transaction,
        /// Consume).
        public var maxCallsPerSecond: Int

        public init(
            interval: Duration = .seconds(600), grace: Duration = .seconds(600),
            lookback: Duration = .seconds(72 * 3_600),
            maxCallsPerSecond: Int = 20
        ) {
            self.interval = interval
            self.grace = grace
            self.lookback = lookback
            self.maxCallsPerSecond = max(1, maxCallsPerSecond)
        }

        /// Whether each claiming pass deletes the reconciler's stale state itself (when the ledger's pruner is off).
        public var prunesOwnState = false
        public var isEnabled: Bool { interval > .zero }
    }

    let pass: ReconcilePass
    let metrics: any EngineMetrics
    let logger: Logger

    init(pass: ReconcilePass, metrics: any EngineMetrics, logger: Logger) {
        self.pass = pass
        self.metrics = metrics
        self.logger = logger
    }

    var clock: any WorkerClock { pass.clock }

    var interval: Duration { pass.configuration.interval }

    public func run() async throws {
        guard pass.configuration.isEnabled else {
            try? await gracefulShutdown()
            return
        }
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let started = clock.instant
                let report = await runOnce(deadline: started + interval)
                if report.stoppedEarly == "cancelled" { return }
                let rest = started + interval - clock.instant
                if rest > .zero {
                    do { try await clock.sleep(for: rest) } catch { return }
                }
            }
        }
    }

    /// One pass of the daemon: claims due users, ends at `deadline`.
    @discardableResult
    func runOnce(deadline: ContinuousClock.Instant) async -> ReconcilePass.Report {
        let report = await pass.run(ReconcilePass.Options(claim: true, deadline: deadline))
        var metadata: Logger.Metadata = [
            "reconcile.users": "\(report.usersChecked)", "reconcile.duration_ms": "\(report.duration.milliseconds)",
        ]
        for (outcome, count) in report.outcomes.sorted(by: { $0.key < $1.key }) {
            metadata["reconcile.\(outcome.rawValue)"] = "\(count)"
        }
        if report.usersLeft > 0 {
            metrics.countReconcileOverrun()
            metadata["reconcile.users_left"] = "\(report.usersLeft)"
            logger.warning(
                """
                reconciliation pass could not check every due user within reconcile.interval_ms; the next pass \
                starts with those left (raise reconcile.max_calls_per_second within Gamebase's limits, or shorten \
                reconcile.lookback_hours)
                """,
                metadata: metadata)
        } else if let stopped = report.stoppedEarly, stopped != "cancelled" {
            metadata["reconcile.stopped"] = "\(stopped)"
            logger.info("reconciliation pass stopped early; the next one tries again", metadata: metadata)
        } else if report.payments > 0 {
            logger.info("reconciliation pass finished", metadata: metadata)
        } else {
            logger.debug("reconciliation pass finished", metadata: metadata)
        }
        return report
    }
}

extension Duration {
    var milliseconds: Int64 { components.seconds * 1_000 + components.attoseconds / 1_000_000_000_000_000 }
}

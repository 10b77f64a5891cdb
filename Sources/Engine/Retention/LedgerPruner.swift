import Foundation
import Fulfilment
import Logging
import ServiceLifecycle
import Wire

/// Keeps the ledger from growing for ever (`ledger.retention.*`): deletes, in small batches, the published outbox
/// rows, rejections, recorded dead letters and reconciler state that outlived their retention, and bounds the rows an
/// outsider can cause without a payment by number. Grants are never deleted.
///
/// Runs on its own schedule, whatever Kafka does (an instance whose broker is away still keeps its ledger): a first
/// pass ``RetentionPolicy/firstPassDelay`` after start, then one per interval — sooner while a pass had to stop with
/// rows still due. On PostgreSQL one instance prunes at a time (each batch takes an advisory lock without waiting; an
/// instance that finds it taken leaves that pass to the holder). Every ledger call has the daemon's deadline.
public struct LedgerPruner: Service {
    let ledger: any RetentionLedger
    let policy: RetentionPolicy
    let deadline: LedgerDeadline
    let metrics: any EngineMetrics
    let clock: any WorkerClock
    let logger: Logger

    /// The kinds a pass goes through, those an outsider can grow first: a backlog elsewhere (a ledger that kept
    /// everything until this version) never holds their bound off.
    static let order: [PrunableRows] = [
        .unconfirmedRejections, .malformedDeadLetters, .refusedNotifications, .publishedOutbox, .confirmedRejections,
        .deadLetters, .reconcileUsers, .reconcileSightings, .otherNotifications,
    ]

    /// How long one pass deletes before it yields to the next (which follows after ``busyPause``).
    let passBudget: Duration
    static let busyPause: Duration = .seconds(1)
    /// Pages of the SQLite file given back per step (each a savepoint in the purchases' group commit: about 1 MiB of
    /// write-ahead log).
    static let reclaimPages = 256

    public init(
        ledger: any RetentionLedger, policy: RetentionPolicy, deadline: LedgerDeadline = LedgerDeadline(),
        passBudget: Duration = .seconds(30), metrics: any EngineMetrics, clock: any WorkerClock = .system,
        logger: Logger
    ) {
        self.ledger = ledger
        self.policy = policy
        self.deadline = deadline
        self.passBudget = passBudget
        self.metrics = metrics
        self.clock = clock
        self.logger = logger
    }

    /// Runs until shutdown. With pruning off it only waits for shutdown: a service that returned would end the daemon.
    public func run() async throws {
        guard let interval = policy.interval else {
            metrics.setLedgerPruneCaughtUp(0)
            try? await gracefulShutdown()
            return
        }
        metrics.setLedgerPruneCaughtUp(clock.now.timeIntervalSince1970)
        await cancelWhenGracefulShutdown {
            do { try await clock.sleep(for: policy.firstPassDelay) } catch { return }
            while !Task.isCancelled {
                let pass = await pruneOnce()
                let pause = pass.stoppedWithRowsDue ? Self.busyPause : interval
                do { try await clock.sleep(for: pause) } catch { return }
            }
        }
    }

    /// What one pass did.
    public struct Pass: Sendable, Hashable {
        /// Rows deleted, by kind.
        public var pruned: [PrunableRows: Int] = [:]
        /// Pages of the SQLite file given back.
        public var reclaimedPages = 0
        /// The pass ended with nothing due left.
        public var caughtUp = false
        /// Another instance was pruning the shared ledger; this one left the pass to it.
        public var leftToAnotherInstance = false
        /// The pass ran out of its time budget with rows still due.
        public var stoppedWithRowsDue = false
        /// The ledger failed (the pass is tried again at the next interval).
        public var failed = false

        public var total: Int { pruned.values.reduce(0, +) }
    }

    /// One pass; never throws (a failure is logged and the next pass tries again).
    public func pruneOnce() async -> Pass {
        var pass = Pass()
        let started = clock.instant
        do {
            kinds: for rows in Self.order {
                guard let cutoff = try await cutoff(of: rows) else { continue }
                while true {
                    guard
                        let deleted = try await deadline.run(
                            "ledger pruning",
                            { [ledger, policy] in
                                try await ledger.prune(rows, before: cutoff, limit: policy.batchRows)
                            })
                    else {
                        pass.leftToAnotherInstance = true
                        break kinds
                    }
                    pass.pruned[rows, default: 0] += deleted
                    metrics.countPruned(table: rows.table, by: deleted)
                    // Done when a batch finds nothing: on PostgreSQL a batch can delete fewer rows than it selected
                    // (one updated beside it is left to the next batch).
                    if deleted == 0 { break }
                    if clock.instant - started >= passBudget {
                        pass.stoppedWithRowsDue = true
                        break kinds
                    }
                }
            }
            if !pass.leftToAnotherInstance {
                while clock.instant - started < passBudget {
                    let pages = try await deadline.run("ledger vacuum") { [ledger] in
                        try await ledger.reclaimSpace(pages: Self.reclaimPages)
                    }
                    pass.reclaimedPages += pages
                    if pages < Self.reclaimPages { break }
                }
            }
            pass.caughtUp = !pass.leftToAnotherInstance && !pass.stoppedWithRowsDue
            if pass.caughtUp { metrics.setLedgerPruneCaughtUp(clock.now.timeIntervalSince1970) }
            // The counts are for people; a ledger too slow to count does not fail the pass.
            do {
                metrics.setLedgerRows(
                    try await deadline.run("ledger row counts") { [ledger] in try await ledger.rowCounts() })
            } catch is CancellationError {
                return pass
            } catch {
                logger.debug("ledger row counts failed", metadata: ["iap.error": "\(error)"])
            }
        } catch is CancellationError {
            return pass
        } catch {
            pass.failed = true
            logger.warning("ledger pruning failed; trying again at the next pass", metadata: ["iap.error": "\(error)"])
            return pass
        }
        if pass.total > 0 || pass.stoppedWithRowsDue {
            var metadata: Logger.Metadata = [
                "prune.rows": "\(pass.total)", "prune.caught_up": "\(pass.caughtUp)",
                "prune.duration": "\(clock.instant - started)",
            ]
            for (rows, count) in pass.pruned where count > 0 { metadata["prune.\(rows.rawValue)"] = "\(count)" }
            if pass.reclaimedPages > 0 { metadata["prune.reclaimed_pages"] = "\(pass.reclaimedPages)" }
            logger.info("ledger pruning pass", metadata: metadata)
        }
        return pass
    }

    /// Rows of `rows` older than the answer are deleted: its age limit, raised to its count bound's cutoff where it
    /// has one and holds more; `nil` when nothing of that kind is due for deletion.
    func cutoff(of rows: PrunableRows) async throws -> Date? {
        // Held back by a forward step of the wall clock: a row stamped before it is not older by the step.
        var cutoff = policy.maximumAge(of: rows).map { clock.wallCutoff(olderThan: $0) }
        if let keeping = policy.maximumCount(of: rows),
            let bound = try await deadline.run(
                "ledger count bound",
                { [ledger] in
                    try await ledger.countBoundCutoff(rows, keeping: keeping)
                })
        {
            // The bound's cutoff is the newest row beyond the kept ones: it and everything older go.
            let beyond = bound.addingTimeInterval(0.001)
            cutoff = max(cutoff ?? beyond, beyond)
        }
        return cutoff
    }
}

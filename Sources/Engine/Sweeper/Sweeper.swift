import Foundation
import Fulfilment
import Logging
import ServiceLifecycle
import Wire

/// Finishes what the flow left: retries Consume for grants still unconsumed and publishes outbox events a crash
/// left unpublished. Safe with many instances: rows are claimed with a lease (`FOR UPDATE SKIP LOCKED` on
/// PostgreSQL), and every step is idempotent.
public struct Sweeper: Service {
    /// When and how much the sweeper takes.
    public struct Configuration: Sendable, Hashable {
        /// Between two passes.
        public var interval: Duration
        /// Rows younger than this still belong to the flow that is running them.
        public var grace: Duration
        /// How long a claimed row is left to the instance that claimed it before another may take it.
        public var lease: Duration
        /// Rows of each kind claimed per pass.
        public var batchSize: Int

        public init(
            interval: Duration = .seconds(10), grace: Duration = .seconds(30), lease: Duration = .seconds(60),
            batchSize: Int = 100
        ) {
            self.interval = interval
            self.grace = grace
            self.lease = lease
            self.batchSize = batchSize
        }
    }

    let processor: PurchaseProcessor
    let ledger: any SweepLedger
    let configuration: Configuration
    let metrics: any EngineMetrics
    let gamebaseMonitor: GamebaseMonitor
    let ledgerMonitor: LedgerMonitor
    let clock: any WorkerClock
    let logger: Logger
    /// Settles refunds left pending beside a grant (the payment lock's backstop), when refunds are taken in.
    var refunds: RefundRecorder? = nil

    public func run() async throws {
        await runPeriodically(every: configuration.interval, on: clock) { _ = await self.sweepOnce() }
    }

    public struct Result: Sendable, Hashable {
        public var published = 0
        public var consumed = 0
        public var stillPending = 0
        /// Grants a refund revoked whose Consume Gamebase refused for good: set aside, not claimed again.
        public var setAside = 0
        /// Set-aside grants whose refund no longer stands, waiting for Consume again.
        public var resumed = 0
        /// Events left for the next pass because their topic refused one of them.
        public var unpublishable = 0
        /// Refunds found pending beside a grant of their payment, and settled.
        public var settledRefunds = 0
    }

    /// One pass; never throws (a failing ledger is reported to the ledger monitor, which pauses intake if it is down).
    /// Grants are left alone while the Gamebase circuit is open or stopped: their Consume would only fail.
    public func sweepOnce() async -> Result {
        var result = Result()
        let now = clock.now
        // Held back by a forward step of the wall clock: a grant stamped just before it is not a leftover.
        let cutoff = clock.wallCutoff(olderThan: configuration.grace)
        let deadline = processor.ledger.deadline
        let (ledger, limit, lease) = (ledger, configuration.batchSize, configuration.lease)
        guard ledgerMonitor.isAvailable else { return result }
        do {
            let claimedAt = clock.now
            let events = try await deadline.run("claim unpublished events") {
                try await ledger.claimUnpublishedEvents(
                    createdBefore: cutoff, limit: limit, lease: lease, now: claimedAt)
            }
            // A topic that refuses its events (missing, not writable) holds back neither the other topics' events nor
            // the Consume retries below; the rest of its events wait for the next pass (each failure can take the
            // producer's whole delivery timeout).
            var refusingTopics: Set<String> = []
            for event in events where !refusingTopics.contains(event.topic) {
                do {
                    try await processor.publish(event)
                    result.published += 1
                } catch let error as LedgerError {
                    throw error
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    refusingTopics.insert(event.topic)
                    logger.error(
                        "sweep could not publish an event; its topic is tried again next pass",
                        metadata: [
                            "iap.event_id": "\(event.id)", "kafka.topic": "\(event.topic)", "iap.error": "\(error)",
                        ])
                }
            }
            result.unpublishable = events.count { refusingTopics.contains($0.topic) }
            if let refunds {
                let metrics = metrics
                result.settledRefunds = try await refunds.settlePendingRefunds(limit: limit) { recording in
                    for revocation in recording.revocations {
                        metrics.countRevocation(store: revocation.store.rawValue, reason: revocation.reason)
                    }
                }.count
            }
            if gamebaseMonitor.allowsCalls {
                // Read again: publishing above can take a producer's whole delivery timeout.
                let claimedAt = clock.now
                let grants = try await deadline.run("claim unconsumed grants") {
                    try await ledger.claimUnconsumedGrants(
                        grantedBefore: cutoff, limit: limit, lease: lease, now: claimedAt)
                }
                for grant in grants {
                    try await processor.publishGrantEventIfNeeded(grant)
                    switch try await processor.consume(grant) {
                    case .done: result.consumed += 1
                    case .pending: result.stillPending += 1
                    case .setAside: result.setAside += 1
                    case .stop(let error):
                        gamebaseMonitor.configurationRejected(error)
                        result.stillPending += 1
                    }
                }
            }
            metrics.setUnconsumedGrants(
                try await deadline.run("count unconsumed") { try await ledger.countUnconsumed() })
            let oldest = try await deadline.run("oldest unconsumed grant") {
                try await ledger.oldestUnconsumedGrantedAt()
            }
            metrics.setOldestUnconsumedGrantAge(oldest.map { max(0, now.timeIntervalSince($0)) } ?? 0)
            // After the work above, and never in its way: a backstop that fails is said and tried next pass; what it
            // takes back is claimed next pass.
            do {
                result.resumed = try await deadline.run("resume set-aside grants") {
                    try await ledger.resumeSetAsideGrants()
                }
            } catch let error as LedgerError {
                logger.warning(
                    "sweep could not take back set-aside grants whose refund no longer stands; tried next pass",
                    metadata: ["iap.error": "\(error)"])
            }
            metrics.setSetAsideGrants(try await deadline.run("count set aside") { try await ledger.countSetAside() })
            if result.published + result.consumed + result.stillPending + result.setAside + result.resumed > 0 {
                logger.info(
                    "sweep finished leftovers",
                    metadata: [
                        "sweep.published": "\(result.published)", "sweep.consumed": "\(result.consumed)",
                        "sweep.pending": "\(result.stillPending)", "sweep.set_aside": "\(result.setAside)",
                        "sweep.resumed": "\(result.resumed)",
                    ])
            }
        } catch is CancellationError {
            return result
        } catch {
            logger.error("sweep failed", metadata: ["iap.error": "\(error)"])
            await ledgerMonitor.reportFailure(error)
        }
        return result
    }
}

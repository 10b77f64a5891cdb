import Foundation
import Fulfilment
import Ledger
import Logging
import Prometheus
import ServiceLifecycle

/// Finishes what the flow left: retries Consume for grants still unconsumed and publishes outbox events a crash
/// left unpublished. Safe with many instances: rows are claimed with a lease (`FOR UPDATE SKIP LOCKED` on
/// PostgreSQL), and every step is idempotent.
public struct Sweeper: Service {
    let processor: PurchaseProcessor
    let interval: Duration
    /// Rows younger than this still belong to the flow that is running them.
    let grace: Duration
    let batchSize: Int
    let metrics: WorkerMetrics
    let gamebaseMonitor: GamebaseMonitor
    let ledgerMonitor: LedgerMonitor
    let logger: Logger

    init(
        processor: PurchaseProcessor, interval: Duration, grace: Duration, batchSize: Int = 100, metrics: WorkerMetrics,
        gamebaseMonitor: GamebaseMonitor, ledgerMonitor: LedgerMonitor, logger: Logger
    ) {
        self.processor = processor
        self.interval = interval
        self.grace = grace
        self.batchSize = batchSize
        self.metrics = metrics
        self.gamebaseMonitor = gamebaseMonitor
        self.ledgerMonitor = ledgerMonitor
        self.logger = logger
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                _ = await sweepOnce()
                do { try await Task.sleep(for: interval) } catch { return }
            }
        }
    }

    public struct Result: Sendable, Hashable {
        public var published = 0
        public var consumed = 0
        public var stillPending = 0
    }

    /// One pass; never throws (a failing ledger is reported to the ledger monitor, which pauses intake if it is down).
    /// Grants are left alone while the Gamebase circuit is open or stopped: their Consume would only fail.
    public func sweepOnce(now: Date = Date()) async -> Result {
        var result = Result()
        let ledger = processor.ledger
        let cutoff = now.addingTimeInterval(-Double(grace.components.seconds))
        guard ledgerMonitor.isAvailable else { return result }
        do {
            for event in try await ledger.claimUnpublishedEvents(createdBefore: cutoff, limit: batchSize, lease: .seconds(60), now: now) {
                try await processor.publish(event)
                result.published += 1
            }
            if gamebaseMonitor.allowsCalls {
                for grant in try await ledger.claimUnconsumedGrants(
                    grantedBefore: cutoff, limit: batchSize, lease: .seconds(60), now: now)
                {
                    try await processor.publishGrantEventIfNeeded(grant)
                    switch try await processor.consume(grant) {
                    case .done: result.consumed += 1
                    case .pending: result.stillPending += 1
                    case .stop(let error):
                        gamebaseMonitor.configurationRejected(error)
                        result.stillPending += 1
                    }
                }
            }
            metrics.setUnconsumedGrants(try await ledger.countUnconsumed())
            let oldest = try await ledger.oldestUnconsumedGrantedAt()
            metrics.setOldestUnconsumedGrantAge(oldest.map { max(0, now.timeIntervalSince($0)) } ?? 0)
            if result.published + result.consumed + result.stillPending > 0 {
                logger.info(
                    "sweep finished leftovers",
                    metadata: [
                        "sweep.published": "\(result.published)", "sweep.consumed": "\(result.consumed)",
                        "sweep.pending": "\(result.stillPending)",
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

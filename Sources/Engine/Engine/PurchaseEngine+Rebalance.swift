import Foundation
import Fulfilment
import Logging
import Synchronization

extension PurchaseEngine {
    /// Runs on the source's thread (see ``PurchaseSource/start(topic:onRebalance:)``): it may block there.
    func handleRebalance(_ event: SourceRebalance) {
        switch event {
        case .assigned(let epochs):
            let partitions = epochs.keys.sorted()
            health.markSubscribed()
            state.withLock { state in
                for (partition, epoch) in epochs { state.partitions[partition] = EngineState.Partition(epoch: epoch) }
            }
            metrics.trackLag(of: partitions)
            // While a dependency holds intake, new partitions wait too (decided under the switch's lock, so a hold
            // ending at this moment cannot leave them paused).
            intake.applyHold(to: partitions)

        case .revoking(let partitions):
            state.withLock { state in
                for partition in partitions { state.partitions[partition]?.owned = false }
            }
            // Let in-flight purchases of these partitions finish (or give up at the deadline), then store their
            // watermarks; the consumer commits them before the partitions move. Purchases waiting for Gamebase or
            // the ledger to come back are not waited for: they are abandoned and redelivered to the new owner.
            let deadline = ContinuousClock.now + configuration.shutdownTimeout
            while ContinuousClock.now < deadline {
                let busy = state.withLock { state in partitions.reduce(0) { $0 + (state.partitions[$1]?.busy ?? 0) } }
                if busy <= 0 { break }
                Thread.sleep(forTimeInterval: 0.002)
            }
            let offsets: [SourcePartition: Int64] = state.withLock { state in
                var offsets: [SourcePartition: Int64] = [:]
                for partition in partitions {
                    if let watermark = state.partitions[partition]?.tracker.watermark { offsets[partition] = watermark }
                    state.partitions[partition] = nil
                }
                return offsets
            }
            metrics.untrackLag(of: partitions)
            do {
                try source.storeOffsets(offsets)
            } catch {
                logger.warning("offsets of revoked partitions not stored", metadata: ["kafka.error": "\(error)"])
            }

        case .lost(let partitions):
            // Another member may own them already: what still runs here will not store offsets.
            state.withLock { state in
                for partition in partitions { state.partitions[partition] = nil }
            }
            metrics.untrackLag(of: partitions)
        }
    }
}

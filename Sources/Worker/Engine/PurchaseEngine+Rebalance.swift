import Foundation
import Kafka
import Ledger
import Logging
import Prometheus
import Synchronization

extension PurchaseEngine {
    /// Runs on the consumer's poll thread (see `KafkaRebalanceHandler`): it may block there.
    func handleRebalance(_ event: KafkaRebalanceEvent) {
        switch event {
        case .assigned(let partitions):
            health.markSubscribed()
            let (stopped, busy) = state.withLock { state -> (Bool, Bool) in
                for partition in partitions {
                    state.nextGeneration += 1
                    state.partitions[partition] = EngineState.Partition(generation: state.nextGeneration)
                }
                return (state.stoppedBy != nil, state.totalInFlight > 0)
            }
            // With the circuit open, new partitions wait too, as long as a held purchase is left to probe.
            if stopped || (busy && breaker.withLock({ $0.isOpen })) { consumer.pause(partitions) }

        case .revoking(let partitions):
            state.withLock { state in
                for partition in partitions { state.partitions[partition]?.owned = false }
            }
            // Let in-flight purchases of these partitions finish (or give up at the deadline), then store their
            // watermarks; the consumer commits them before the partitions move.
            let deadline = ContinuousClock.now + configuration.shutdownTimeout
            while ContinuousClock.now < deadline {
                let busy = state.withLock { state in partitions.reduce(0) { $0 + (state.partitions[$1]?.inFlight ?? 0) } }
                if busy == 0 { break }
                Thread.sleep(forTimeInterval: 0.002)
            }
            let offsets: [TopicPartition: Int64] = state.withLock { state in
                var offsets: [TopicPartition: Int64] = [:]
                for partition in partitions {
                    if let watermark = state.partitions[partition]?.tracker.watermark { offsets[partition] = watermark }
                    state.partitions[partition] = nil
                }
                return offsets
            }
            do {
                try consumer.storeOffsets(offsets)
            } catch {
                logger.warning("offsets of revoked partitions not stored", metadata: ["kafka.error": "\(error)"])
            }

        case .lost(let partitions):
            // Another member may own them already: what still runs here will not store offsets.
            state.withLock { state in
                for partition in partitions { state.partitions[partition] = nil }
            }
        }
    }
}

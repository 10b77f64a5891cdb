import CRdKafka
import Logging
import Synchronization

/// The rebalance callback's way back to the consumer; weak, because the consumer owns the context.
struct RebalanceTarget: Sendable {
    weak var core: ConsumerCore?
}

extension RDKafkaClientContext {
    /// Called by librdkafka on the poll thread, inside `rd_kafka_consumer_poll` or `rd_kafka_consumer_close`.
    func rebalance(
        rk: OpaquePointer, err: rd_kafka_resp_err_t, partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
    ) {
        if let core = rebalanceTarget.withLock({ $0?.core }) {
            core.rebalance(err: err, partitions: partitions)
        } else {
            // The consumer is gone; let librdkafka proceed with no application involvement.
            ConsumerCore.applyAssignment(rk: rk, err: err, partitions: partitions)
        }
    }
}

extension ConsumerCore {
    func rebalance(err: rd_kafka_resp_err_t, partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) {
        let changed = TopicPartitionList.partitions(of: partitions)
        let handler = control.withLock { $0.rebalanceHandler }
        switch err {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
            Self.applyAssignment(rk: client.handle, err: err, partitions: partitions)
            // librdkafka keeps a partition's pause through an unassign: one given back starts paused unless told
            // otherwise. The pause belonged to the earlier assignment (the application pauses it again if it still
            // holds its intake, and the buffer's bound is applied on the next poll).
            _ = rd_kafka_resume_partitions(client.handle, partitions)
            control.withLock { control in
                control.assignment.formUnion(changed)
                control.assignedOnce = true
                control.lastEpoch += 1
                for partition in changed { control.epochs[partition] = control.lastEpoch }
            }
            logger.info("partitions assigned", metadata: ["kafka.partitions": "\(changed.sorted())"])
            handler?(.assigned(changed))

        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
            let lost = rd_kafka_assignment_lost(client.handle) != 0
            let revoked = Set(changed)
            control.withLock { control in
                control.assignment.subtract(revoked)
                control.physicallyPaused.subtract(revoked)
                // A pause belongs to an assignment: a partition that comes back later starts unpaused, and the
                // application pauses it again if it still holds its intake (else it would never be fetched).
                control.applicationPaused.subtract(revoked)
                for partition in revoked { control.epochs[partition] = nil }
            }
            // Nothing of these partitions may start once the handler has run.
            buffer.purge(revoked)
            logger.info(
                lost ? "partitions lost" : "partitions revoking", metadata: ["kafka.partitions": "\(changed.sorted())"])
            handler?(lost ? .lost(changed) : .revoking(changed))
            if !lost {
                // Offsets stored by the handler are committed while the partitions are still ours.
                let commitErr = rd_kafka_commit(client.handle, nil, 0)
                if commitErr != RD_KAFKA_RESP_ERR_NO_ERROR && commitErr != RD_KAFKA_RESP_ERR__NO_OFFSET {
                    control.withLock { $0.revokeCommitFailures += 1 }
                    logger.warning(
                        "commit before revoke failed",
                        metadata: ["kafka.error": "\(RDKafkaErrorCode(commitErr).message)"])
                }
            }
            Self.applyAssignment(rk: client.handle, err: err, partitions: partitions)

        default:
            logger.error("rebalance error", metadata: ["kafka.error": "\(RDKafkaErrorCode(err).message)"])
            control.withLock { control in
                control.assignment.removeAll()
                control.epochs.removeAll()
                control.physicallyPaused.removeAll()
                control.applicationPaused.removeAll()
            }
            buffer.purge(Set(changed))
            rd_kafka_assign(client.handle, nil)
        }
    }

    /// Tells librdkafka to take or drop the partitions, incrementally under the cooperative protocol.
    static func applyAssignment(
        rk: OpaquePointer, err: rd_kafka_resp_err_t, partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>
    ) {
        let cooperative = String(cString: rd_kafka_rebalance_protocol(rk)) == "COOPERATIVE"
        let assigning = err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS
        if cooperative {
            let error =
                assigning ? rd_kafka_incremental_assign(rk, partitions) : rd_kafka_incremental_unassign(rk, partitions)
            if let error { rd_kafka_error_destroy(error) }
        } else {
            rd_kafka_assign(rk, assigning ? partitions : nil)
        }
    }
}

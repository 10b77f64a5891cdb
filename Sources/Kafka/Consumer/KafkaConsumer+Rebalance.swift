import CRdKafka
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

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
            control.withLock { control in
                control.assignment.formUnion(changed)
                control.assignedOnce = true
                control.lastEpoch += 1
                for partition in changed { control.epochs[partition] = control.lastEpoch }
            }
            logger.info("partitions assigned", metadata: ["kafka.partitions": "\(changed.sorted())"])
            // The application first (nothing of these partitions is fetched before librdkafka takes them): a pause it
            // wants for them, while it holds its intake, is then settled with the rest below.
            handler?(.assigned(changed))
            settlePauses(ofAssigning: Set(changed))
            Self.applyAssignment(rk: client.handle, err: err, partitions: partitions)

        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
            let lost = rd_kafka_assignment_lost(client.handle) != 0
            let revoked = Set(changed)
            control.withLock { control in
                control.assignment.subtract(revoked)
                control.physicallyPaused.subtract(revoked)
                for partition in revoked { control.unstarted[partition] = nil }
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
                control.unstarted.removeAll()
                control.applicationPaused.removeAll()
            }
            buffer.purge(Set(changed))
            rd_kafka_assign(client.handle, nil)
        }
    }

    /// Pauses or resumes partitions about to be assigned as the buffer and the application want them, before librdkafka
    /// takes them, and leaves them so until their fetch has started.
    ///
    /// librdkafka versions each pause, resume and fetch start of a partition, and drops an operation it serves after
    /// one of a newer version. Once assigned, a partition's fetch starts on librdkafka's thread when the group's
    /// committed offsets arrive; a pause or resume of ours that takes its version between that start's version and its
    /// queueing is served first, the start is dropped, and the partition is never fetched, with no error (librdkafka
    /// #5591; 2.0.2 versions a resume of a partition that is not paused too, so the resume this consumer issued after
    /// every assignment once left a fresh member's partitions unread now and then). Before the assignment nothing else
    /// changes the partition, and the start is versioned after these. After it, the partition keeps this pause until
    /// its fetch has started (``Control/unstarted``): one of its messages has arrived, or librdkafka's statistics made
    /// after this show its `fetch_state` started. While statistics made after this say it has not, it waits on; with
    /// none, it waits ``fetchStartAllowance`` at most. Meanwhile a full buffer or a hold does not pause it, and what it
    /// lets through is bounded by librdkafka's queue.
    ///
    /// A resume is needed even for a partition nobody paused in this assignment: librdkafka keeps a partition's pause
    /// through an unassign, and that pause belonged to the earlier assignment. librdkafka skips a partition it does not
    /// know yet (a member's first partitions of a topic: it learns of them from this assignment); such a partition is
    /// not paused, and is paused once its fetch has started if it should be.
    func settlePauses(ofAssigning partitions: Set<TopicPartition>) {
        let wanted = control.withLock { control in
            control.bufferFull ? partitions : control.applicationPaused.intersection(partitions)
        }
        let fetch = UnstartedFetch(
            assignedAt: UnstartedFetch.statisticsClockMicroseconds(),
            assumedBy: ContinuousClock.now + fetchStartAllowance)
        let unknown = applyPause(wanted, pause: true)
        applyPause(partitions.subtracting(wanted), pause: false)
        control.withLock { control in
            control.physicallyPaused.subtract(partitions)
            control.physicallyPaused.formUnion(wanted.subtracting(unknown))
            for partition in partitions { control.unstarted[partition] = fetch }
        }
    }
}

/// A partition assigned whose fetch may not have started yet (``ConsumerCore/Control/unstarted``).
struct UnstartedFetch: Sendable {
    /// When its pause was settled, on the clock of librdkafka's statistics (``statisticsClockMicroseconds()``).
    var assignedAt: Int64
    /// When its fetch is assumed to have started if no message and no statistics made since show whether it has.
    var assumedBy: ContinuousClock.Instant

    /// Now on the clock librdkafka stamps its statistics with (`rd_clock`, their `ts`): `CLOCK_MONOTONIC` in
    /// microseconds, or the wall clock in microseconds on Apple's systems.
    static func statisticsClockMicroseconds() -> Int64 {
        #if canImport(Darwin)
            var now = timeval()
            gettimeofday(&now, nil)
            return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_usec)
        #else
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1_000
        #endif
    }
}

extension ConsumerCore {
    /// How long after its assignment a partition's fetch is assumed to have started when no message of it and no
    /// statistics made since show whether it has: three statistics intervals, a minute at least; three seconds when
    /// librdkafka sends no statistics (the group's committed offsets are a round trip to its coordinator away; a
    /// commit in flight or a coordinator that does not answer can hold the start longer).
    static func fetchStartAllowance(statisticsInterval: String?) -> Duration {
        let interval = statisticsInterval.flatMap { Int(String($0.filter { !$0.isWhitespace })) } ?? 0
        guard interval > 0 else { return .seconds(3) }
        return max(.seconds(60), .milliseconds(interval) * 3)
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

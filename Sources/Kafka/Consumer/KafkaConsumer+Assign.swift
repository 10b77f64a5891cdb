import CRdKafka
import Logging
import Synchronization

/// Where reading a partition starts.
public enum KafkaStartOffset: Sendable, Hashable {
    /// The partition's first record still kept.
    case beginning
    /// The partition's end when the fetch starts: only records produced after that.
    case end
    /// This offset (a record offset, or the high watermark for "what comes next").
    case offset(Int64)

    var rawValue: Int64 {
        switch self {
        case .beginning: Int64(RD_KAFKA_OFFSET_BEGINNING)
        case .end: Int64(RD_KAFKA_OFFSET_END)
        case .offset(let offset): offset
        }
    }
}

/// Reading without a group: the caller chooses the partitions and where each starts.
extension KafkaConsumer {
    /// Starts fetching `partitions` from their start offsets, in addition to those already assigned (librdkafka's
    /// incremental assign: partitions assigned earlier keep their positions). Nothing is committed or fetched from a
    /// group's committed offsets.
    ///
    /// - Important: Meant for a consumer made with ``KafkaConsumerConfiguration/reader(bootstrapServers:groupIDPrefix:maxBufferedBytes:properties:)``;
    ///   never mix it with ``subscribe(topics:)``.
    /// - Throws: ``KafkaError`` with code `.partitionControl` when librdkafka refuses the assignment, or the consumer is
    ///   a group member.
    public func assign(_ partitions: [TopicPartition: KafkaStartOffset]) throws(KafkaError) {
        // Assigning beside a group's assignment would fetch partitions the group gave to another member.
        guard core.isReader else {
            throw KafkaError(code: .partitionControl, message: "only a group-less reader assigns partitions itself")
        }
        guard !partitions.isEmpty else { return }
        let list = TopicPartitionList(partitions.mapValues(\.rawValue))
        // The epochs first: a message of a partition without one is dropped by the poll thread.
        let previous = core.control.withLock { control in
            let previous = control.epochs
            control.assignedOnce = true
            control.lastEpoch += 1
            for partition in partitions.keys { control.epochs[partition] = control.lastEpoch }
            return previous
        }
        if let error = rd_kafka_incremental_assign(core.client.handle, list.pointer) {
            core.control.withLock { $0.epochs = previous }
            throw KafkaError.consuming(error, code: .partitionControl)
        }
        // Only now in the assignment, which the poll thread pauses when the buffer is full: librdkafka has queued each
        // partition's fetch start (from an offset given here it starts within the assignment), and a pause versioned
        // before that start was queued would drop it (see `ConsumerCore.settlePauses(ofAssigning:)`).
        core.control.withLock { $0.assignment.formUnion(partitions.keys) }
        core.logger.debug(
            "partitions assigned by the reader", metadata: ["kafka.partitions": "\(partitions.keys.sorted())"])
    }

    /// The partition ids of each of `topics` that exists now. A topic missing from the answer does not exist (yet), or
    /// the brokers report an error for it (e.g. its leader is not elected yet). The metadata request names no topic,
    /// so it never creates one (a broker's `auto.create.topics.enable`).
    ///
    /// - Throws: ``KafkaError`` with code `.timeout` when the brokers do not answer in time.
    public func partitions(of topics: Set<String>, timeoutMilliseconds: Int32 = 10_000) async throws(KafkaError)
        -> [String: [Int32]]
    {
        let client = core.client
        let result: Result<[String: [Int32]], KafkaError> = await ConsumerCore.offPool {
            var pointer: UnsafePointer<rd_kafka_metadata>?
            let err = rd_kafka_metadata(client.handle, 1, nil, &pointer, timeoutMilliseconds)
            guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata = pointer else {
                return .failure(KafkaError.from(err, code: .timeout, context: "metadata request"))
            }
            defer { rd_kafka_metadata_destroy(metadata) }
            var found: [String: [Int32]] = [:]
            for index in 0..<Int(metadata.pointee.topic_cnt) {
                let entry = metadata.pointee.topics[index]
                let name = String(cString: entry.topic)
                guard topics.contains(name), entry.err == RD_KAFKA_RESP_ERR_NO_ERROR, entry.partition_cnt > 0 else {
                    continue
                }
                found[name] = (0..<Int(entry.partition_cnt)).map { entry.partitions[$0].id }.sorted()
            }
            return .success(found)
        }
        return try result.get()
    }

    /// The high watermark of each partition: the offset the next record will get.
    ///
    /// - Throws: ``KafkaError`` when a partition's watermarks cannot be queried.
    public func endOffsets(_ partitions: [TopicPartition], timeoutMilliseconds: Int32 = 10_000) async throws(KafkaError)
        -> [TopicPartition: Int64]
    {
        let client = core.client
        let result: Result<[TopicPartition: Int64], KafkaError> = await ConsumerCore.offPool {
            var ends: [TopicPartition: Int64] = [:]
            for partition in partitions {
                var low: Int64 = 0
                var high: Int64 = 0
                let err = rd_kafka_query_watermark_offsets(
                    client.handle, partition.topic, partition.partition, &low, &high, timeoutMilliseconds)
                guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
                    return .failure(KafkaError.from(err, code: .timeout, context: "watermarks of \(partition)"))
                }
                ends[partition] = high
            }
            return .success(ends)
        }
        return try result.get()
    }

    /// For each partition, the offset of its first record whose timestamp is at or after `timestampMilliseconds`
    /// (librdkafka's offsets-for-times); ``KafkaStartOffset/end`` where there is none.
    ///
    /// - Throws: ``KafkaError`` when the brokers do not answer, or answer with an error for a partition.
    public func offsets(
        atOrAfter timestampMilliseconds: Int64, for partitions: [TopicPartition], timeoutMilliseconds: Int32 = 10_000
    ) async throws(KafkaError) -> [TopicPartition: KafkaStartOffset] {
        guard !partitions.isEmpty else { return [:] }
        let client = core.client
        let result: Result<[TopicPartition: KafkaStartOffset], KafkaError> = await ConsumerCore.offPool {
            let list = TopicPartitionList(
                Dictionary(partitions.map { ($0, timestampMilliseconds) }) { first, _ in first })
            let err = rd_kafka_offsets_for_times(client.handle, list.pointer, timeoutMilliseconds)
            guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
                return .failure(KafkaError.from(err, code: .timeout, context: "offsets for times"))
            }
            if let failed = list.firstError() {
                return .failure(
                    KafkaError.from(failed.error, code: .timeout, context: "offsets for times of \(failed.partition)"))
            }
            var offsets: [TopicPartition: KafkaStartOffset] = [:]
            for (partition, offset) in list.offsets { offsets[partition] = offset >= 0 ? .offset(offset) : .end }
            return .success(offsets)
        }
        return try result.get()
    }
}

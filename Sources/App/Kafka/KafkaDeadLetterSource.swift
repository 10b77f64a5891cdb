import Fulfilment
import Kafka
import Synchronization

/// The dead-letter topic as `reprocess` reads it, over a Kafka group consumer of the run's own
/// (``Reprocessor/groupID(base:reason:)``): from the group's committed offsets up to the end offsets taken when the
/// run opens.
///
/// A partition's end is the broker's latest offset when the run opens, raised to the high watermark of the partition's
/// first fetch when that is later (for a partition with records to read, whose first record lies before that end): Apache Kafka answers both alike (the fetch's is later only by what was written
/// since), but a broker whose latest-offset answer lags its log (Tansu answers the last batch's first offset + 1) would
/// otherwise end the run inside its last batch. A partition is done when its record at `end - 1` was read, when a record at or past its end arrives (written after
/// the run opened: left for the next run, the partition paused), or, after `idle` without a record, when the
/// consumer's position already stands at its end (its last offsets are gaps). Records that stop coming otherwise
/// (another run owns the partition) end the run with ``DeadLetterSourceStopped``.
final class KafkaDeadLetterSource: DeadLetterSource {
    private let consumer: KafkaConsumer
    private let topic: String
    private let idle: Duration
    private struct State {
        var endOffsets: [Int32: Int64] = [:]
        var remaining: Set<Int32> = []
        /// Partitions whose end was checked against their first fetch.
        var fetched: Set<Int32> = []
    }
    private let state = Mutex(State())

    init(consumer: KafkaConsumer, topic: String, idle: Duration) {
        self.consumer = consumer
        self.topic = topic
        self.idle = idle
    }

    func open() async throws -> [Int32: Int64] {
        let marks = try await consumer.watermarks(topic: topic)
        let endOffsets = marks.mapValues(\.high)
        let partitions = marks.keys.map { TopicPartition(topic, $0) }
        let committed = try await consumer.committedOffsets(for: partitions)
        let remaining = Set(
            marks.compactMap { partition, mark -> Int32? in
                let start = max((committed[TopicPartition(topic, partition)] ?? nil) ?? mark.low, mark.low)
                return start < mark.high ? partition : nil
            })
        state.withLock { $0 = State(endOffsets: endOffsets, remaining: remaining) }
        if !remaining.isEmpty { try consumer.subscribe(topics: [topic]) }
        return endOffsets
    }

    var hasMore: Bool { state.withLock { !$0.remaining.isEmpty } }

    var endOffsets: [Int32: Int64] { state.withLock { $0.endOffsets } }

    func next() async throws -> SourcedRecord? {
        var iterator = consumer.messages.makeAsyncIterator()
        while hasMore {
            let message: KafkaMessage
            switch try await iterator.next(within: idle) {
            case .message(let next):
                message = next
            case .ended:
                throw DeadLetterSourceStopped(reason: "the consumer closed")
            case .timedOut:
                // A partition whose last offsets are gaps (or that another run owns) never shows its last record.
                let remaining = state.withLock { $0.remaining }
                let positions = consumer.positions(for: remaining.map { TopicPartition(topic, $0) })
                let left = state.withLock { state -> Set<Int32> in
                    for (partition, position) in positions {
                        if let position, let end = state.endOffsets[partition.partition], position >= end {
                            state.remaining.remove(partition.partition)
                        }
                    }
                    return state.remaining
                }
                if !left.isEmpty {
                    throw DeadLetterSourceStopped(
                        reason:
                            "no record for \(idle) before the end offsets of partitions \(left.sorted()) (owned by another run?)"
                    )
                }
                continue
            }
            let consumer = self.consumer
            let take = state.withLock { state -> Bool in
                // The fetch that brought a partition's first record also told its high watermark (librdkafka's cache,
                // no request). Used only for a partition the run was to read, whose first record lies before the
                // answer at the start: a record written after the start to a partition that had nothing to read stays
                // the next run's (the run's own dead letters among them).
                if state.fetched.insert(message.partition).inserted, state.remaining.contains(message.partition),
                    message.offset < state.endOffsets[message.partition] ?? 0,
                    let fetchedEnd = consumer.cachedHighWatermark(of: message.topicPartition),
                    fetchedEnd > state.endOffsets[message.partition] ?? 0
                {
                    state.endOffsets[message.partition] = fetchedEnd
                }
                let end = state.endOffsets[message.partition] ?? 0
                guard message.offset < end else {
                    // Written after the run started (possibly by this run): left for the next one.
                    state.remaining.remove(message.partition)
                    return false
                }
                if message.offset == end - 1 { state.remaining.remove(message.partition) }
                return true
            }
            guard take else {
                consumer.pause([message.topicPartition])
                continue
            }
            return SourcedRecord(
                input: message.purchaseInput(provenanceTrusted: true), assignmentEpoch: message.assignmentEpoch,
                byteCount: message.byteCount)
        }
        return nil
    }

    func markDone(_ record: SourcedRecord) throws {
        let source = record.input.source
        try consumer.storeOffsets([TopicPartition(source.topic, source.partition): source.offset + 1])
    }

    func close(commit: Bool) async {
        if commit { try? await consumer.commit() }
        await consumer.close()
    }
}

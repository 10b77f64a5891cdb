import Fulfilment
import Kafka
import Wire

/// Follows the worker's three output topics without a consumer group: every partition is assigned directly
/// (``KafkaConsumer/assign(_:)``), nothing is committed, so the workers' group never sees it.
///
/// Partitions are found through metadata at the start and again every `refreshInterval`: a topic that does not
/// exist yet is waited for (with one note), and a topic or partition that appears later is read from its beginning
/// (everything in it was written after the tail started).
public struct EventFollower: Sendable {
    /// Where the partitions found at the start are read from.
    public enum Start: Sendable, Hashable {
        /// Only events written after the start (the partitions' end offsets, taken before the first note).
        case end
        case beginning
        /// Events whose record timestamp is at or after this time (milliseconds since the epoch).
        case since(milliseconds: Int64)
    }

    public var topics: TailTopics
    public var start: Start
    public var refreshInterval: Duration

    public init(topics: TailTopics, start: Start, refreshInterval: Duration = .seconds(5)) {
        self.topics = topics
        self.start = start
        self.refreshInterval = refreshInterval
    }

    /// Reads until `consumer` is closed (the caller closes it on SIGINT or SIGTERM), calling `event` for each record
    /// of the three topics and `note` with a line for people (standard error): what is followed, topics waited for.
    ///
    /// - Parameter consumer: made with ``KafkaConsumerConfiguration/reader(bootstrapServers:groupIDPrefix:maxBufferedBytes:properties:)``.
    /// - Throws: ``KafkaError`` when the consumer fails fatally.
    public func run(
        consumer: KafkaConsumer, event: @escaping @Sendable (TailEvent) -> Void,
        note: @escaping @Sendable (String) -> Void
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                await discover(consumer: consumer, note: note)
            }
            // A lookup by time starts at the first record at or after it, on Apache Kafka; a broker that answers
            // otherwise (Tansu answers a time after every record with offset 0: docs/compatibility.md) would show the
            // past, so records older than the time asked for are left out here too.
            // Only until a partition's first record at or after that time: what follows is live, and a producer whose
            // clock is behind must not lose its records to the filter.
            let notBefore: Int64? = if case .since(let milliseconds) = start { milliseconds } else { nil }
            var reached: Set<TopicPartition> = []
            for try await message in consumer.messages {
                if let notBefore, let written = message.timestampMilliseconds, !reached.contains(message.topicPartition)
                {
                    if written < notBefore { continue }
                    reached.insert(message.topicPartition)
                }
                if let tailEvent = TailEvent(message, topics: topics) { event(tailEvent) }
            }
            // The consumer was closed: stop looking for partitions.
            group.cancelAll()
        }
    }

    /// Assigns the partitions found now, then looks for new ones every `refreshInterval` until cancelled.
    func discover(consumer: KafkaConsumer, note: @Sendable (String) -> Void) async {
        var known: Set<TopicPartition> = []
        var waitingFor: Set<String> = []
        var first = true
        var unreachableNoted = false
        let wanted = Set(topics.all)
        while !Task.isCancelled {
            do {
                let found = try await consumer.partitions(of: wanted)
                unreachableNoted = false
                let fresh = found.flatMap { topic, ids in ids.map { TopicPartition(topic, $0) } }.filter {
                    !known.contains($0)
                }
                if !fresh.isEmpty {
                    let starts = try await startOffsets(fresh, first: first, consumer: consumer)
                    try consumer.assign(starts)
                    known.formUnion(fresh)
                    for (topic, partitions) in Dictionary(grouping: fresh, by: \.topic).sorted(by: { $0.key < $1.key })
                    {
                        let from = first ? describe(start) : "the beginning (new since the start)"
                        note("following \(topic) (\(partitions.count) partition(s)) from \(from)")
                    }
                }
                for topic in topics.all.sorted() where found[topic] == nil && !waitingFor.contains(topic) {
                    waitingFor.insert(topic)
                    note(
                        "warning: topic \(topic) does not exist (yet); waiting for it (checked every \(refreshInterval))"
                    )
                }
                waitingFor.subtract(found.keys)
                first = false
            } catch {
                if !unreachableNoted {
                    note("warning: cannot read the topics' partitions yet (\(error)); retrying")
                    unreachableNoted = true
                }
            }
            try? await Task.sleep(for: refreshInterval)
        }
    }

    func startOffsets(_ partitions: [TopicPartition], first: Bool, consumer: KafkaConsumer) async throws(KafkaError)
        -> [TopicPartition: KafkaStartOffset]
    {
        guard first else { return Dictionary(uniqueKeysWithValues: partitions.map { ($0, .beginning) }) }
        switch start {
        case .beginning:
            return Dictionary(uniqueKeysWithValues: partitions.map { ($0, .beginning) })
        case .end:
            // Concrete end offsets, taken now: whatever is written after the "following" note is shown, even if the
            // fetch starts later.
            return try await consumer.endOffsets(partitions).mapValues { .offset($0) }
        case .since(let milliseconds):
            var starts = try await consumer.offsets(atOrAfter: milliseconds, for: partitions)
            // No record that recent: the concrete end, as for `.end`.
            let atEnd = starts.filter { $0.value == .end }.map(\.key)
            for (partition, end) in try await consumer.endOffsets(atEnd) { starts[partition] = .offset(end) }
            return starts
        }
    }

    private func describe(_ start: Start) -> String {
        switch start {
        case .end: "the end"
        case .beginning: "the beginning"
        case .since(let milliseconds): "records since \(TailLine.timeText(milliseconds))"
        }
    }
}

extension TailLine {
    static func timeText(_ milliseconds: Int64) -> String {
        RFC3339.string(epochMilliseconds: milliseconds)
    }
}

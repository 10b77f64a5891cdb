import Kafka
import Logging
import Synchronization

extension KafkaConsumer {
    /// Every record on `topics` up to their end as it is when the read starts, and what arrives while it listens: a
    /// group-less reader assigns every partition from its first record and reads until it has the record before each
    /// partition's high watermark and no record has arrived for `quiet` — so it listens for `quiet` at least, even on
    /// an empty topic, and a broker whose high watermark lags its last batch (Tansu's) gives the rest of that batch
    /// then. A topic that does not exist by the end of the first `quiet` has no records.
    ///
    /// Waiting for the watermarks, not for a first record within a few seconds, keeps a loaded machine's slow start
    /// (a reader's first fetch can take seconds there) from reading as an empty topic.
    ///
    /// - Throws: ``KafkaError`` when the reader fails or the brokers do not answer; ``TopicReadError`` when the
    ///   records up to the watermarks have not all arrived within `timeLimit`. Records that keep arriving after the
    ///   watermarks were reached end the read at `timeLimit`, with what arrived until then.
    public static func readWhole(
        _ topics: [String], bootstrapServers: String, logger: Logger, within timeLimit: Duration = .seconds(60),
        quiet: Duration = .seconds(2)
    ) async throws -> [KafkaMessage] {
        let consumer = try KafkaConsumer(configuration: .reader(bootstrapServers: bootstrapServers), logger: logger)
        do {
            let messages = try await consumer.readWhole(topics, within: timeLimit, quiet: quiet)
            await consumer.close()
            return messages
        } catch {
            await consumer.close()
            throw error
        }
    }

    /// ``readWhole(_:bootstrapServers:logger:within:quiet:)`` of one topic.
    public static func readWhole(
        topic: String, bootstrapServers: String, logger: Logger, within timeLimit: Duration = .seconds(60),
        quiet: Duration = .seconds(2)
    ) async throws -> [KafkaMessage] {
        try await readWhole(
            [topic], bootstrapServers: bootstrapServers, logger: logger, within: timeLimit, quiet: quiet)
    }

    private func readWhole(_ topics: [String], within timeLimit: Duration, quiet: Duration) async throws
        -> [KafkaMessage]
    {
        let started = ContinuousClock.now
        let deadline = started + timeLimit
        var ends: [TopicPartition: Int64] = [:]
        var partitions: [TopicPartition] = []
        for topic in Set(topics) {
            guard let marks = try await marks(of: topic, waitingUntil: min(deadline, started + quiet)) else { continue }
            for (partition, mark) in marks {
                partitions.append(TopicPartition(topic, partition))
                if mark.high > mark.low { ends[TopicPartition(topic, partition)] = mark.high }
            }
        }
        guard !partitions.isEmpty else { return [] }
        try assign(Dictionary(uniqueKeysWithValues: partitions.map { ($0, .beginning) }))
        // The quiet counts from the assignment: the time spent finding the partitions is no listening.
        let state = ReadState(ends: ends, since: .now)
        let messages = self.messages
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    for try await message in messages { state.withLock { $0.add(message) } }
                    state.withLock { $0.failure = KafkaError(code: .closed, message: "the reader stopped") }
                } catch {
                    state.withLock { $0.failure = error }
                }
            }
            defer { group.cancelAll() }
            while true {
                let (missing, quietFor, failure) = state.withLock {
                    ($0.missing, ContinuousClock.now - $0.lastArrival, $0.failure)
                }
                if let failure { throw failure }
                if missing.isEmpty, quietFor >= quiet { return }
                if ContinuousClock.now >= deadline {
                    if missing.isEmpty { return }  // still arriving: what came within the time
                    throw TopicReadError(
                        "\(topics): the records up to the high watermarks did not all arrive within \(timeLimit); "
                            + "partitions short of their end: \(missing.sorted { $0.key < $1.key })")
                }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        return state.withLock { $0.collected }
    }

    /// `topic`'s watermarks; nil when the topic does not exist by `limit`. Other errors are retried until then.
    private func marks(of topic: String, waitingUntil limit: ContinuousClock.Instant) async throws
        -> [Int32: (low: Int64, high: Int64)]?
    {
        while true {
            do {
                return try await watermarks(topic: topic)
            } catch {
                guard ContinuousClock.now < limit else {
                    if error.code == .subscription { return nil }  // no such topic
                    throw error
                }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

/// Records that did not arrive in time (``KafkaConsumer/readWhole(_:bootstrapServers:logger:within:quiet:)``).
public struct TopicReadError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// What a whole-topic read has so far, shared by the task that reads and the one that waits.
private final class ReadState: Sendable {
    private let progress: Mutex<ReadProgress>

    init(ends: [TopicPartition: Int64], since: ContinuousClock.Instant) {
        progress = Mutex(ReadProgress(ends: ends, lastArrival: since))
    }

    func withLock<T>(_ body: (inout ReadProgress) -> T) -> T { progress.withLock { body(&$0) } }
}

private struct ReadProgress {
    /// Each partition's high watermark at the start: the offset after the last record to wait for.
    let ends: [TopicPartition: Int64]
    var reached: [TopicPartition: Int64] = [:]
    var collected: [KafkaMessage] = []
    /// The last record's arrival, or the start of the read: the quiet is counted from it.
    var lastArrival: ContinuousClock.Instant
    /// Why the reading task ended.
    var failure: (any Error)?

    init(ends: [TopicPartition: Int64], lastArrival: ContinuousClock.Instant) {
        self.ends = ends
        self.lastArrival = lastArrival
    }

    mutating func add(_ message: KafkaMessage) {
        collected.append(message)
        lastArrival = .now
        reached[message.topicPartition] = max(reached[message.topicPartition] ?? -1, message.offset)
    }

    /// Partition → (the last offset read, the offset to reach), for those not read to their end yet.
    var missing: [TopicPartition: String] {
        ends.reduce(into: [:]) { missing, end in
            let last = reached[end.key] ?? -1
            if last < end.value - 1 { missing[end.key] = "at \(last) of \(end.value - 1)" }
        }
    }
}

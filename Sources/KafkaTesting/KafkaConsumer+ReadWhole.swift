import Kafka
import Logging
import Synchronization

extension KafkaConsumer {
    /// Every record on `topic` up to its end as it is now: a group-less reader assigns each partition from its first
    /// record and reads until it has the record before each partition's high watermark, then until no record has
    /// arrived for `quiet` (a broker whose high watermark lags its last batch, as Tansu's does, gives the rest of that
    /// batch then). A topic that does not exist has no records.
    ///
    /// Waiting for the watermarks, not for a first record within a few seconds, keeps a loaded machine's slow start
    /// (a reader's first fetch can take seconds there) from reading as an empty topic.
    ///
    /// - Throws: ``KafkaError`` when the brokers do not answer; a ``TopicReadError`` when the records up to the
    ///   watermarks have not all arrived within `timeLimit`.
    public static func readWhole(
        topic: String, bootstrapServers: String, logger: Logger, within timeLimit: Duration = .seconds(60),
        quiet: Duration = .seconds(2)
    ) async throws -> [KafkaMessage] {
        let consumer = try KafkaConsumer(configuration: .reader(bootstrapServers: bootstrapServers), logger: logger)
        do {
            let messages = try await consumer.readWhole(topic: topic, within: timeLimit, quiet: quiet)
            await consumer.close()
            return messages
        } catch {
            await consumer.close()
            throw error
        }
    }

    private func readWhole(topic: String, within timeLimit: Duration, quiet: Duration) async throws -> [KafkaMessage] {
        var ends: [Int32: Int64] = [:]
        do {
            for (partition, mark) in try await watermarks(topic: topic) where mark.high > mark.low {
                ends[partition] = mark.high
            }
        } catch {
            if error.code == .subscription { return [] }  // no such topic
            throw error
        }
        guard !ends.isEmpty else { return [] }
        try assign(Dictionary(uniqueKeysWithValues: ends.keys.map { (TopicPartition(topic, $0), .beginning) }))
        let state = ReadState(ends: ends)
        let deadline = ContinuousClock.now + timeLimit
        let messages = self.messages
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for try await message in messages { state.withLock { $0.add(message) } }
            }
            while true {
                let (missing, quietFor) = state.withLock { ($0.missing, ContinuousClock.now - $0.lastArrival) }
                if missing.isEmpty, quietFor >= quiet { break }
                if !missing.isEmpty, ContinuousClock.now >= deadline {
                    group.cancelAll()
                    throw TopicReadError(
                        "\(topic): the records up to the high watermarks did not all arrive within \(timeLimit); "
                            + "partitions short of their end: \(missing.sorted { $0.key < $1.key })")
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            group.cancelAll()
        }
        return state.withLock { $0.collected }
    }
}

/// Records that did not arrive in time (``KafkaConsumer/readWhole(topic:bootstrapServers:logger:within:quiet:)``).
public struct TopicReadError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// What a whole-topic read has so far, shared by the task that reads and the one that waits.
private final class ReadState: Sendable {
    private let progress: Mutex<ReadProgress>

    init(ends: [Int32: Int64]) { progress = Mutex(ReadProgress(ends: ends)) }

    func withLock<T>(_ body: (inout ReadProgress) -> T) -> T { progress.withLock { body(&$0) } }
}

private struct ReadProgress {
    /// Each partition's high watermark at the start: the offset after the last record to wait for.
    let ends: [Int32: Int64]
    var reached: [Int32: Int64] = [:]
    var collected: [KafkaMessage] = []
    var lastArrival = ContinuousClock.now

    mutating func add(_ message: KafkaMessage) {
        collected.append(message)
        lastArrival = .now
        reached[message.partition] = max(reached[message.partition] ?? -1, message.offset)
    }

    /// Partition → (the last offset read, the offset to reach), for those not read to their end yet.
    var missing: [Int32: String] {
        ends.reduce(into: [:]) { missing, end in
            let last = reached[end.key] ?? -1
            if last < end.value - 1 { missing[end.key] = "at \(last) of \(end.value - 1)" }
        }
    }
}

import Console
import Kafka
import Logging

/// The console's dead-letter records (`console.show_payloads`): each read opens a group-less reader on the record's
/// partition at its offset, takes that one record, and closes it — nothing is committed, no group sees it.
public struct KafkaDeadLetterRecords: DeadLetterRecordSource {
    let configuration: WorkerConfiguration
    let logger: Logger

    public init(configuration: WorkerConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    public var topic: String { configuration.topics.deadLetter }

    /// How long a read waits for its record.
    static let wait: Duration = .seconds(5)

    /// How far past the broker's latest-offset answer a record is looked for: one producer batch (librdkafka's
    /// `batch.num.messages` is at most 10,000 by default, and Tansu's answer is its last batch's first offset + 1).
    static let batchSlack: Int64 = 10_000

    public func value(partition: Int32, offset: Int64) async throws -> [UInt8]? {
        var reader = configuration.readerConfiguration(purpose: "console")
        // Little beyond the record: not a prefetch of the whole partition.
        reader.maxBufferedBytes = 8 << 20
        reader.kafka["queued.max.messages.kbytes"] = reader.kafka["queued.max.messages.kbytes"] ?? "8192"
        // An offset out of range is no reason to fetch the partition from its beginning.
        reader.kafka["auto.offset.reset"] = "error"
        let consumer = try KafkaConsumer(configuration: reader, logger: logger)
        do {
            let value = try await read(consumer, partition: partition, offset: offset)
            await consumer.close()
            return value
        } catch {
            await consumer.close()
            throw error
        }
    }

    private func read(_ consumer: KafkaConsumer, partition: Int32, offset: Int64) async throws -> [UInt8]? {
        // An offset below what the partition holds (or a partition that does not exist) is no read. One at or past the
        // broker's latest offset is read all the same: Apache Kafka holds nothing there (the read waits, or the offset
        // is out of range and, with auto.offset.reset=error, reported rather than reset to the beginning: either way
        // no record), but a broker whose latest-offset answer lags its log (Tansu) holds the rest of its last batch
        // there: up to one batch beyond it (``batchSlack``); an offset further out is refused at once.
        let marks = try await consumer.watermarks(topic: topic, timeoutMilliseconds: 5_000)
        guard let mark = marks[partition], offset >= mark.low, offset - mark.high < Self.batchSlack else { return nil }
        try consumer.assign([TopicPartition(topic, partition): .offset(offset)])
        var messages = consumer.messages.makeAsyncIterator()
        let deadline = ContinuousClock.now + Self.wait
        while ContinuousClock.now < deadline {
            switch try await messages.next(within: deadline - ContinuousClock.now) {
            case .message(let message) where message.offset == offset:
                return message.value
            case .message:
                // The offset is gone (compacted or removed): another record came instead (a later one, or an earlier
                // one after a reset of an offset removed meanwhile).
                return nil
            case .timedOut, .ended:
                return nil
            }
        }
        return nil
    }
}

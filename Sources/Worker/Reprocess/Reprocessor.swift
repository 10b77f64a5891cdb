import Foundation
import Fulfilment
import Gamebase
import Kafka
import Ledger
import Logging

/// `iap-worker reprocess`: re-drives dead-lettered records through the flow, once each, and ends.
///
/// It takes the dead-letter topic's end offsets when it starts and stops there, so a record that fails again —
/// which goes back to the same topic with its attempt count raised — is not read again in the same run. It reads
/// with a consumer group of its own (`<kafka.group_id>.reprocess`, plus the reason when filtered), storing each
/// record's offset only once its outcome is durable. It stops early, committing what is done, when Gamebase refuses
/// the configuration or does not answer at all: re-driving into an outage would only dead-letter everything again.
public struct Reprocessor: Sendable {
    public struct Options: Sendable {
        public var reason: String?
        public var limit: Int?
        public var dryRun: Bool
        /// Stop when no record arrives for this long although the end offsets are not reached (a partition owned
        /// by another reprocess run, or offsets that are gaps).
        public var idle: Duration

        public init(reason: String? = nil, limit: Int? = nil, dryRun: Bool = false, idle: Duration = .seconds(30)) {
            self.reason = reason
            self.limit = limit
            self.dryRun = dryRun
            self.idle = idle
        }
    }

    /// What a run did.
    public struct Report: Sendable {
        /// Records handled, by the reason they had been dead-lettered for, then by what happened now.
        public var outcomes: [String: [String: Int]] = [:]
        /// Records passed over by the `--reason` filter.
        public var skipped = 0
        /// End offsets taken at the start, by partition.
        public var endOffsets: [Int32: Int64] = [:]
        /// Why the run ended before the end offsets, when it did.
        public var stoppedEarly: String?
        /// The run stopped on a configuration failure (the command exits non-zero).
        public var failed = false

        public var handled: Int { outcomes.values.reduce(0) { $0 + $1.values.reduce(0, +) } }

        mutating func count(_ reason: String, _ outcome: String) {
            outcomes[reason, default: [:]][outcome, default: 0] += 1
        }
    }

    let configuration: WorkerConfiguration
    let ledger: any LedgerStore
    let gamebase: any GamebaseAPI
    let logger: Logger

    /// - Parameter configuration: the worker's configuration; the dead-letter topic is read with the group above.
    public init(configuration: WorkerConfiguration, ledger: any LedgerStore, gamebase: any GamebaseAPI, logger: Logger) {
        self.configuration = configuration
        self.ledger = ledger
        self.gamebase = gamebase
        self.logger = logger
    }

    /// The consumer group a run with this filter reads with: each filter keeps its own progress.
    public static func groupID(base: String, reason: String?) -> String {
        base + ".reprocess" + (reason.map { ".\($0)" } ?? "")
    }

    public func run(_ options: Options) async throws -> Report {
        let topic = configuration.topics.deadLetter
        var consumerConfiguration = configuration
        consumerConfiguration.groupID = Self.groupID(base: configuration.groupID, reason: options.reason)
        let consumer = try KafkaConsumer(configuration: consumerConfiguration.consumerConfiguration, logger: logger)
        let producer = try KafkaProducer(configuration: configuration.producerConfiguration, logger: logger)
        let processor = PurchaseProcessor(
            gamebase: gamebase, ledger: ledger, publisher: KafkaEventPublisher(producer: producer),
            configuration: FulfilmentConfiguration(
                groupID: configuration.groupID, itemGrantedTopic: configuration.topics.itemGranted,
                consumeFailedTopic: configuration.topics.consumeFailed, deadLetterTopic: topic,
                workerName: "iap-worker reprocess", rejectTestPurchases: configuration.rejectTestPurchases,
                maxMessageBytes: configuration.maxMessageBytes, verifyRetry: configuration.retry,
                consumeRetry: configuration.retry),
            logger: logger)
        var report = Report()
        do {
            try await read(topic: topic, consumer: consumer, processor: processor, options: options, report: &report)
        } catch {
            if !options.dryRun { try? await consumer.commit() }
            await consumer.close()
            await producer.close()
            throw error
        }
        if !options.dryRun { try? await consumer.commit() }
        await consumer.close()
        await producer.close()
        return report
    }

    private func read(
        topic: String, consumer: KafkaConsumer, processor: PurchaseProcessor, options: Options, report: inout Report
    ) async throws {
        // Where the run ends: the end offsets now. What is added later (records that fail again) is the next run's.
        let marks = try await consumer.watermarks(topic: topic)
        report.endOffsets = marks.mapValues(\.high)
        let partitions = marks.keys.map { TopicPartition(topic, $0) }
        let committed = try await consumer.committedOffsets(for: partitions)
        var remaining = Set(
            marks.compactMap { partition, mark -> Int32? in
                let start = max((committed[TopicPartition(topic, partition)] ?? nil) ?? mark.low, mark.low)
                return start < mark.high ? partition : nil
            })
        guard !remaining.isEmpty else { return }
        try consumer.subscribe(topics: [topic])
        var iterator = consumer.messages.makeAsyncIterator()
        var handled = 0
        while !remaining.isEmpty {
            if let limit = options.limit, handled >= limit {
                report.stoppedEarly = "--limit \(limit) reached"
                return
            }
            let message: KafkaMessage
            switch try await iterator.next(within: options.idle) {
            case .message(let next):
                message = next
            case .ended:
                report.stoppedEarly = "the consumer closed"
                return
            case .timedOut:
                // A partition whose last offsets are gaps (or that another run owns) never shows its last record.
                let positions = consumer.positions(for: remaining.map { TopicPartition(topic, $0) })
                for (partition, position) in positions {
                    if let position, let end = report.endOffsets[partition.partition], position >= end {
                        remaining.remove(partition.partition)
                    }
                }
                if !remaining.isEmpty {
                    report.stoppedEarly =
                        "no record for \(options.idle) before the end offsets of partitions \(remaining.sorted()) (owned by another run?)"
                    return
                }
                continue
            }
            let end = report.endOffsets[message.partition] ?? 0
            guard message.offset < end else {
                // Written after the run started (possibly by this run): left for the next one.
                remaining.remove(message.partition)
                consumer.pause([message.topicPartition])
                continue
            }
            if message.offset == end - 1 { remaining.remove(message.partition) }
            let input = PurchaseInput(
                key: message.key, value: message.value,
                headers: message.headers.map { RecordHeader(name: $0.name, value: $0.value) },
                source: MessageSource(topic: message.topic, partition: message.partition, offset: message.offset),
                timestampMilliseconds: message.timestampMilliseconds, provenanceTrusted: true)
            let reason = input.deadLetterReason ?? "unknown"
            if let wanted = options.reason, reason != wanted {
                report.skipped += 1
                if !options.dryRun { try consumer.storeOffset(for: message) }
                continue
            }
            handled += 1
            if options.dryRun {
                let seq = (try? processor.parse(input).get().paymentSeq) ?? "(malformed)"
                let origin = input.originalSource.map { "\($0.topic)[\($0.partition)]@\($0.offset)" } ?? "unknown origin"
                print("would re-drive \(seq) from \(origin), dead-lettered for \(reason), attempts \(input.previousAttempts)")
                report.count(reason, "would_redrive")
                continue
            }
            guard let outcome = try await redrive(input, processor: processor) else {
                report.count(reason, "stopped")
                report.failed = true
                report.stoppedEarly = "Gamebase rejects the configuration"
                return
            }
            report.count(reason, outcome)
            if outcome == "gamebase_down" {
                report.count(reason, "stopped")
                report.stoppedEarly = "Gamebase does not answer; nothing more is re-driven until it does"
                return
            }
            await recordOutcome(outcome, of: message)
            try consumer.storeOffset(for: message)
        }
    }

    /// Tells the ledger what became of the dead letter (shown by `iap-worker find`); a ledger that refuses it costs
    /// the lookup, not the run.
    private func recordOutcome(_ outcome: String, of message: KafkaMessage) async {
        let location = RecordLocation(topic: message.topic, partition: message.partition, offset: message.offset)
        do {
            try await ledger.recordReprocessOutcome(deadLetter: location, outcome: outcome, at: Date())
        } catch {
            logger.warning(
                "reprocess outcome not recorded in the ledger",
                metadata: ["kafka.offset": "\(message.offset)", "iap.error": "\(error)"])
        }
    }

    /// Runs one record through the flow; returns what happened, or `nil` when Gamebase refuses the configuration
    /// (nothing is committed for it). `"gamebase_down"` means the record was not handled either.
    private func redrive(_ input: PurchaseInput, processor: PurchaseProcessor) async throws -> String? {
        let parsed = processor.parse(input)
        if case .failure(let malformed) = parsed {
            // Still malformed: back to the dead-letter topic for audit, attempts raised; no second consume-failed
            // event (downstream heard of it when it was first dead-lettered).
            try await processor.publishDeadLetter(
                processor.configuration.deadLetters.record(
                    for: input, reason: .malformedMessage, error: malformed.problem, attempts: 1, at: Date()),
                for: input)
            return "malformed_again"
        }
        switch try await processor.process(input, parsed: parsed) {
        case .gamebaseUnavailable(let error, let attempts):
            guard case .answers = await gamebase.probe(transactionID: GamebaseTransactionID()) else { return "gamebase_down" }
            try await processor.deadLetter(input, reason: .gamebaseUnavailable, error: error.description, attempts: attempts)
            return "dead_lettered_again"
        case .stop:
            return nil
        case let outcome:
            return outcome.metricLabel
        }
    }
}

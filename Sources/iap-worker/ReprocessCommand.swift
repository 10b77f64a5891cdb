import ArgumentParser
import Foundation
import Fulfilment
import Gamebase
import Kafka
import Ledger
import Logging
import Worker

struct ReprocessCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reprocess",
        abstract: "Re-drives dead-lettered messages through the consume flow.",
        discussion: """
            Reads the dead-letter topic with a consumer group of its own (<kafka.group_id>.reprocess, plus the \
            reason when --reason is given, so each filter keeps its own progress) and runs every record through \
            the flow, which is idempotent. A record that fails again goes back to the dead-letter topic with its \
            attempt count raised. Stops when no record arrives for --idle-seconds, or after --limit records.
            """
    )

    @Option(name: .customLong("config"), help: "YAML configuration file (default: $IAP_WORKER_CONFIG).")
    var configFile: String?
    @Option(help: "Only records dead-lettered for this reason (iap-reason), e.g. gamebase_unavailable.")
    var reason: String?
    @Option(help: "Stop after this many records.")
    var limit: Int?
    @Flag(name: .customLong("dry-run"), help: "Show what would be re-driven; change and commit nothing.")
    var dryRun = false
    @Option(name: .customLong("idle-seconds"), help: "Stop when no record arrives for this long.")
    var idleSeconds: Int = 10

    func validate() throws {
        if let limit, limit <= 0 { throw ValidationError("--limit must be positive") }
        if let reason, ConsumeFailureReason(rawValue: reason) == nil {
            throw ValidationError(
                "--reason must be one of \(ConsumeFailureReason.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard idleSeconds > 0 else { throw ValidationError("--idle-seconds must be positive") }
    }

    func run() async throws {
        var loaded = try await WorkerConfiguration.load(configFile: configFile)
        LoggingSetup.bootstrap(format: .text, level: .warning)
        let logger = Logger(label: "iap-worker.reprocess")
        loaded.groupID += ".reprocess" + (reason.map { ".\($0)" } ?? "")
        loaded.topics.purchases = loaded.topics.deadLetter
        let settings = (reason: reason, limit: limit, dryRun: dryRun, idle: Duration.seconds(idleSeconds))
        let configuration = loaded
        let counts = try await LedgerStores.withStore(url: configuration.ledgerURL, logger: logger) { ledger in
            try await Reprocessor(configuration: configuration, ledger: ledger, logger: logger).run(
                reason: settings.reason, limit: settings.limit, dryRun: settings.dryRun, idle: settings.idle)
        }
        print(dryRun ? "dry run: nothing changed, nothing committed" : "reprocessed")
        for (outcome, count) in counts.sorted(by: { $0.key < $1.key }) {
            print("  \(outcome.padding(toLength: 22, withPad: " ", startingAt: 0)) \(count)")
        }
        if counts["stopped"] != nil { throw ExitCode(1) }
    }
}

/// The loop behind `iap-worker reprocess`.
struct Reprocessor {
    let configuration: WorkerConfiguration
    let ledger: any LedgerStore
    let logger: Logger

    func run(reason: String?, limit: Int?, dryRun: Bool, idle: Duration) async throws -> [String: Int] {
        let consumer = try KafkaConsumer(configuration: configuration.consumerConfiguration, logger: logger)
        let producer = try KafkaProducer(configuration: configuration.producerConfiguration, logger: logger)
        let gamebase = GamebaseClient(configuration: configuration.gamebaseConfiguration, logger: logger)
        let processor = PurchaseProcessor(
            gamebase: gamebase, ledger: ledger, publisher: KafkaEventPublisher(producer: producer),
            configuration: FulfilmentConfiguration(
                groupID: configuration.groupID, itemGrantedTopic: configuration.topics.itemGranted,
                consumeFailedTopic: configuration.topics.consumeFailed, deadLetterTopic: configuration.topics.deadLetter,
                workerName: "iap-worker reprocess", rejectTestPurchases: configuration.rejectTestPurchases,
                maxMessageBytes: configuration.maxMessageBytes, verifyRetry: configuration.retry,
                consumeRetry: configuration.retry),
            logger: logger)
        try consumer.subscribe(topics: [configuration.topics.deadLetter])
        var counts: [String: Int] = [:]
        var seen = 0
        do {
            while limit.map({ seen < $0 }) ?? true {
                guard let message = try await Self.next(from: consumer, within: idle) else { break }
                let input = PurchaseInput(
                    key: message.key, value: message.value,
                    headers: message.headers.map { RecordHeader(name: $0.name, value: $0.value) },
                    source: MessageSource(topic: message.topic, partition: message.partition, offset: message.offset),
                    timestamp: message.timestampMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) })
                if let reason, input.deadLetterReason != reason {
                    if !dryRun { try consumer.storeOffset(for: message) }
                    continue
                }
                seen += 1
                let origin = input.originalSource.map { "\($0.topic)[\($0.partition)]@\($0.offset)" } ?? "unknown origin"
                if dryRun {
                    let seq = (try? processor.parse(input).get().paymentSeq) ?? "(malformed)"
                    print("would re-drive \(seq) from \(origin), dead-lettered for \(input.deadLetterReason ?? "?"), attempts \(input.previousAttempts)")
                    counts["would_redrive", default: 0] += 1
                    continue
                }
                let outcome = try await processor.process(input)
                switch outcome {
                case .gamebaseUnavailable(let error, let attempts):
                    try await processor.deadLetter(input, reason: .gamebaseUnavailable, error: error.description, attempts: attempts)
                    counts["dead_lettered_again", default: 0] += 1
                case .stop(let error, _):
                    print("stopped: Gamebase rejects the configuration (\(error.message)); nothing more was committed")
                    counts["stopped", default: 0] += 1
                    throw CancellationError()
                default:
                    counts[outcome.metricLabel, default: 0] += 1
                }
                try consumer.storeOffset(for: message)
            }
        } catch is CancellationError {}
        if !dryRun { try? await consumer.commit() }
        await consumer.close()
        await producer.close()
        try? await gamebase.shutdown()
        return counts
    }

    /// The next message, or `nil` after `idle` without one.
    static func next(from consumer: KafkaConsumer, within idle: Duration) async throws -> KafkaMessage? {
        try await withThrowingTaskGroup(of: KafkaMessage?.self) { group in
            group.addTask {
                var iterator = consumer.messages.makeAsyncIterator()
                return try await iterator.next()
            }
            group.addTask {
                try await Task.sleep(for: idle)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}

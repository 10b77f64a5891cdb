import App
import ArgumentParser
import EventTail
import Foundation
import Fulfilment
import Kafka
import Logging
import ServiceLifecycle
import UnixSignals

struct EventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Watches the worker's own events.",
        subcommands: [Tail.self]
    )

    struct Tail: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Follows item-granted, consume-failed, dead-letter and item-revoked records live, one line each.",
            discussion: """
                Reads kafka.topics.item_granted, kafka.topics.consume_failed, kafka.topics.dead_letter and \
                kafka.topics.item_revoked of the \
                configuration (--config, $IAP_WORKER_CONFIG and the environment, as for run). Each line shows the \
                record's time (UTC), the type, paymentSeq, userId, and the product and source (item-granted), the \
                reason (consume-failed), the reason and original topic[partition]@offset (dead-letter), or the \
                product, reason and notification source (item-revoked, refund-reversed); "-" where \
                the record does not say. Purchase tokens, record values and other headers are never shown; control \
                and format characters in a field are escaped (\\u{1B}), and so are spaces and backslashes.

                It reads without a consumer group: every partition is assigned directly and nothing is ever \
                committed, so the workers' group is never disturbed. A topic that does not exist yet is waited for; \
                topics and partitions that appear later are picked up within 5 s and read from their beginning. \
                Notes (what is followed, topics waited for) go to standard error; events to standard output.

                Stop with Ctrl-C (SIGINT) or SIGTERM: exit 0.

                Examples:
                  iap-worker events tail
                  iap-worker events tail --since 1h --type consume-failed,dead-letter
                  iap-worker events tail --from-beginning --user u-123 --json
                """
        )

        @Option(name: .customLong("config"), help: "YAML configuration file (default: $IAP_WORKER_CONFIG).")
        var configFile: String?
        @Option(
            name: .customLong("type"),
            help:
                "Only these types: item-granted, consume-failed, dead-letter, item-revoked, refund-reversed (repeatable, or a comma list)."
        )
        var types: [String] = []
        @Option(help: "Only events of this userId (exact).")
        var user: String?
        @Option(name: .customLong("payment-seq"), help: "Only events of this paymentSeq (exact).")
        var paymentSeq: String?
        @Option(help: "Only consume-failed and dead-letter events with this reason, e.g. malformed_message.")
        var reason: String?
        @Flag(
            name: .customLong("from-beginning"), help: "Start from the oldest record kept (default: only new events).")
        var fromBeginning = false
        @Option(help: "Start from records written in this last duration: 30s, 10m, 2h, 1d.")
        var since: String?
        @Flag(help: "One JSON object per line (docs/schemas/events-tail-line.schema.json).")
        var json = false

        func validate() throws {
            do {
                _ = try TailFilter.kinds(types)
                if let since { _ = try TailDuration.milliseconds(since) }
            } catch {
                throw ValidationError("\(error)")
            }
            // A misspelt reason would match nothing, silently.
            if let reason, ConsumeFailureReason(rawValue: reason) == nil {
                throw ValidationError(
                    "--reason must be one of \(ConsumeFailureReason.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            if fromBeginning, since != nil { throw ValidationError("--from-beginning and --since exclude each other") }
            for (name, value) in [("--user", user), ("--payment-seq", paymentSeq), ("--reason", reason)] {
                if value?.isEmpty == true { throw ValidationError("\(name) must not be empty") }
            }
        }

        func run() async throws {
            let configuration = try await WorkerConfiguration.load(configFile: configFile)
            // librdkafka's warnings (a broker unreachable) go to standard error with the notes; events alone to stdout.
            LoggingSetup.bootstrap(format: .text, level: .warning)
            let logger = Logger(label: "iap-worker.events-tail")
            let filter = TailFilter(
                kinds: try TailFilter.kinds(types), userId: user, paymentSeq: paymentSeq, reason: reason)
            let sinceMilliseconds = try since.map { text throws(TailArgumentError) in
                try TailDuration.milliseconds(text)
            }
            let start: EventFollower.Start =
                if fromBeginning {
                    .beginning
                } else if let sinceMilliseconds {
                    .since(milliseconds: Int64(Date().timeIntervalSince1970 * 1_000) - sinceMilliseconds)
                } else {
                    .end
                }
            let topics = TailTopics(
                itemGranted: configuration.topics.itemGranted, consumeFailed: configuration.topics.consumeFailed,
                deadLetter: configuration.topics.deadLetter, itemRevoked: configuration.topics.itemRevoked)
            let consumer = try KafkaConsumer(
                configuration: configuration.readerConfiguration(purpose: "events-tail"), logger: logger)
            let follower = EventFollower(topics: topics, start: start)
            let json = json
            let tail = TailService(follower: follower, consumer: consumer) { event in
                guard filter.matches(event) else { return }
                print(json ? TailLine.json(event) : TailLine.text(event))
                fflushStandardOutput()
            }
            let group = ServiceGroup(
                configuration: .init(
                    services: [
                        .init(
                            service: tail, successTerminationBehavior: .gracefullyShutdownGroup,
                            failureTerminationBehavior: .gracefullyShutdownGroup)
                    ],
                    gracefulShutdownSignals: [.sigterm, .sigint], cancellationSignals: [], logger: logger))
            try await group.run()
            exitAfterCleanShutdown()
        }
    }
}

/// Runs the follower until graceful shutdown (SIGINT, SIGTERM), which closes the reader: the follower then ends and
/// the command exits 0.
struct TailService: Service {
    let follower: EventFollower
    let consumer: KafkaConsumer
    let print: @Sendable (TailEvent) -> Void

    func run() async throws {
        try await withGracefulShutdownHandler {
            try await follower.run(consumer: consumer, event: print) { note in
                FileHandle.standardError.write(Data((note + "\n").utf8))
            }
        } onGracefulShutdown: {
            consumer.initiateClose()
        }
        await consumer.close()
    }
}

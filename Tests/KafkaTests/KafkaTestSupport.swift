import Foundation
import IAPTestSupport
import Kafka
import KafkaTesting
import Logging
import Synchronization
import Testing

/// Shared set-up for the Kafka layer's tests: on librdkafka's in-process mock cluster, or on a real broker process
/// (Tansu) when `IAP_TEST_KAFKA_BROKER=tansu` (scripts/test-lanes.py runs them both ways).
enum KafkaTestSupport {
    /// The first and the last log lines of this process's Kafka clients (librdkafka's group debugging included),
    /// printed when ``take(_:from:within:)`` waits in vain: a group that never formed on a loaded machine says why in
    /// CI's output (scripts/test-lanes.py prints a failed issue's details). One per process: scripts/test-lanes.py
    /// runs each Kafka test in a process of its own, so the first lines are that test's.
    static let flightRecorder = FlightRecorder(head: 150, tail: 250)

    static let logger: Logger = {
        let printing = ProcessInfo.processInfo.environment["KAFKA_TEST_LOG"] != nil
        var logger = Logger(label: "kafka.test") { label in
            var handlers: [any LogHandler] = [flightRecorder.handler()]
            if printing { handlers.append(StreamLogHandler.standardError(label: label)) }
            return MultiplexLogHandler(handlers)
        }
        logger.logLevel = .debug
        return logger
    }()

    /// The endpoint under test: a mock cluster of `mockBrokers` brokers, or one Tansu broker.
    static func endpoint(mockBrokers: Int = 1) throws -> any KafkaEndpoint {
        try KafkaEndpointKind.underTest.start(mockBrokers: mockBrokers, logger: logger)
    }

    /// A fresh group id: reusing one across tests can upset the mock's group coordinator.
    static func uniqueGroup(_ name: String = #function) -> String {
        "\(name.prefix { $0 != "(" })-\(UUID().uuidString.prefix(8))"
    }

    /// Short session timeouts keep the mock's rebalances quick (see KAFKA-MOCK-NOTES.md).
    static func consumer(
        _ cluster: any KafkaEndpoint, group: String, sessionTimeoutMilliseconds: Int = 3_000,
        rebalanceHandler: KafkaRebalanceHandler? = nil, maxBufferedMessages: Int = 10_000, extra: [String: String] = [:]
    ) throws -> KafkaConsumer {
        var properties = [
            // The group's joins, syncs and heartbeats, for the flight recorder (a few lines a second).
            "debug": "cgrp",
            "session.timeout.ms": "\(sessionTimeoutMilliseconds)",
            "heartbeat.interval.ms": "300",
            "topic.metadata.refresh.interval.ms": "1000",
            "auto.commit.interval.ms": "200",
            // As the worker does (every 5 s there): they show when a newly assigned partition's fetch has started,
            // after which it may be paused (KafkaConsumer+Rebalance.swift, settlePauses).
            "statistics.interval.ms": "500",
        ]
        properties.merge(extra) { $1 }
        return try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers, groupID: group, maxBufferedMessages: maxBufferedMessages,
                properties: properties),
            logger: logger, rebalanceHandler: rebalanceHandler)
    }

    static func producer(_ cluster: any KafkaEndpoint, extra: [String: String] = [:]) throws -> KafkaProducer {
        try KafkaProducer(
            configuration: KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers, properties: extra),
            logger: logger)
    }

    /// Produces `count` records `value-<i>` with keys `key-<i>`, all acknowledged.
    static func produce(_ producer: KafkaProducer, topic: String, range: Range<Int>) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in range {
                group.addTask {
                    try await producer.send(
                        KafkaProducerRecord(topic: topic, key: Array("key-\(i)".utf8), value: Array("value-\(i)".utf8)))
                }
            }
            try await group.waitForAll()
        }
    }

    /// Creates `topic` with `partitions` partitions and produces `perPartition` records `r<i>` to each, round robin.
    static func fill(_ cluster: any KafkaEndpoint, topic: String, partitions: Int, perPartition: Int) async throws {
        try cluster.createTopic(topic, partitions: partitions)
        let producer = try KafkaTestSupport.producer(cluster)
        for i in 0..<(partitions * perPartition) {
            try await producer.send(
                KafkaProducerRecord(topic: topic, partition: Int32(i % partitions), value: Array("r\(i)".utf8)))
        }
        await producer.close()
    }

    /// Takes `count` messages, or fails after `seconds`.
    static func take(_ count: Int, from consumer: KafkaConsumer, within seconds: Double = 20) async throws
        -> [KafkaMessage]
    {
        let arrived = ArrivedCount()
        return try await withThrowingTaskGroup(of: [KafkaMessage]?.self) { group in
            group.addTask {
                var taken: [KafkaMessage] = []
                for try await message in consumer.messages {
                    taken.append(message)
                    arrived.count.store(taken.count, ordering: .relaxed)
                    if taken.count == count { break }
                }
                return taken
            }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                return nil
            }
            let first = try await group.next()!
            group.cancelAll()
            guard let taken = first else {
                Issue.record(
                    """
                    timed out after \(seconds) s waiting for \(count) messages (\(arrived.count.load(ordering: .relaxed)) \
                    arrived); the Kafka clients' first and last log lines:
                    \(flightRecorder.lines.joined(separator: "\n"))
                    """)
                return []
            }
            return taken
        }
    }
}

extension Trait where Self == ConditionTrait {
    /// A test that needs librdkafka's mock cluster (fault injection, several brokers): skipped on a real broker.
    static func mockClusterOnly(_ why: String) -> Self {
        .enabled(
            if: KafkaEndpointKind.underTest == .mock, Comment(rawValue: "needs librdkafka's mock cluster: \(why)"))
    }
}

extension KafkaMessage {
    var text: String { String(decoding: value, as: UTF8.self) }
}

/// Records what a test consumer processed, under one lock that the rebalance handler also takes, so that a
/// revoke waits for the message being processed (as the worker's engine does).
final class ProcessedLog: Sendable {
    private let state = Mutex<[String: [String]]>([:])

    func process(_ message: KafkaMessage, by member: String, consumer: KafkaConsumer) throws {
        try state.withLock { state in
            // A message taken just before its partition was revoked is no longer ours: its new owner gets it.
            guard consumer.assignment.contains(message.topicPartition) else { return }
            state[member, default: []].append(message.text)
            try consumer.storeOffset(for: message)
        }
    }

    /// Waits for the message being processed, if any.
    func barrier() { state.withLock { _ in } }

    var all: [String] { state.withLock { $0.values.flatMap { $0 } } }
    func count(of member: String) -> Int { state.withLock { $0[member]?.count ?? 0 } }
}

/// How many messages a ``KafkaTestSupport/take(_:from:within:)`` had when it gave up.
private final class ArrivedCount: Sendable {
    let count = Atomic<Int>(0)
}

/// Keeps the first `head` log lines of every logger it hands a handler to and the last `tail` after them, each with
/// the time it was logged: a group's join is at the start of a test, and a heartbeat every 300 ms would soon push it
/// out of a ring of the last lines alone. An entry is kept as it came and made a line only when ``lines`` is read
/// (nearly all are overwritten unread), and a line is cut at ``maxLineCharacters``: a log line that carries a whole
/// record must not make a failure's report megabytes long.
final class FlightRecorder: Sendable {
    struct Entry: Sendable {
        var time: Double
        var level: Logger.Level
        var message: Logger.Message
        var metadata: Logger.Metadata

        var line: String {
            let text = "\(String(format: "%.3f", time)) \(level) \(message)\(metadata.isEmpty ? "" : " \(metadata)")"
            guard text.count > FlightRecorder.maxLineCharacters else { return text }
            return "\(text.prefix(FlightRecorder.maxLineCharacters))… (\(text.count) characters)"
        }
    }

    private struct Kept {
        var head: [Entry] = []
        var tail: [Entry] = []
        /// Where the next entry goes in a full `tail`.
        var next = 0
        var dropped = 0
    }

    static let maxLineCharacters = 1_000

    private let headCapacity: Int
    private let tailCapacity: Int
    private let kept = Mutex(Kept())

    init(head: Int, tail: Int) {
        precondition(head >= 0 && tail > 0, "a flight recorder keeps at least one last line")
        self.headCapacity = head
        self.tailCapacity = tail
    }

    /// The kept lines, oldest first, with a line saying how many were dropped between the first and the last ones.
    var lines: [String] {
        let (head, dropped, tail) = kept.withLock { kept in
            (kept.head, kept.dropped, Array(kept.tail[kept.next...] + kept.tail[..<kept.next]))
        }
        return head.map(\.line) + (dropped > 0 ? ["… \(dropped) lines dropped …"] : []) + tail.map(\.line)
    }

    func record(_ entry: Entry) {
        kept.withLock { kept in
            if kept.head.count < headCapacity {
                kept.head.append(entry)
            } else if kept.tail.count < tailCapacity {
                kept.tail.append(entry)
            } else {
                kept.tail[kept.next] = entry
                kept.next = (kept.next + 1) % tailCapacity
                kept.dropped += 1
            }
        }
    }

    func handler() -> Handler { Handler(recorder: self) }

    struct Handler: LogHandler {
        let recorder: FlightRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            // librdkafka lists the whole assignment (DUMP, DUMP_ALL, DUMP_PND …) on every auto-commit, five times
            // a second: they would fill the last lines with the same six lines.
            if case .string(let facility) = merged["kafka.facility"], facility.hasPrefix("DUMP") { return }
            recorder.record(
                Entry(
                    time: Date().timeIntervalSince1970, level: event.level, message: event.message, metadata: merged))
        }
    }
}

import App
import Foundation
import Kafka
import KafkaTesting
import Logging

/// Produces purchase messages to the sandbox's purchases topic, all at once or at a steady rate, and remembers
/// when each was sent (its message timestamp, to the millisecond).
///
/// One producer serves the warm-up and the measured purchases: like a game server's, it is connected and has
/// its idempotent producer id before the measured messages are stamped. (A new producer for the measured run
/// put its own start — up to 1.6 s — into the latency of the first messages, and so into p99.)
final class LoadGenerator: Sendable {
    private let producer: KafkaProducer
    private let topic: String

    convenience init(sandbox: Sandbox, logger: Logger) throws {
        try self.init(
            bootstrapServers: sandbox.cluster.bootstrapServers, topic: sandbox.topicNames.purchases, logger: logger)
    }

    init(bootstrapServers: String, topic: String, logger: Logger) throws {
        self.topic = topic
        producer = try KafkaProducer(
            configuration: .init(
                bootstrapServers: bootstrapServers,
                properties: ["linger.ms": "2", "queue.buffering.max.messages": "1000000"]),
            logger: logger)
    }

    func close() async {
        await producer.close()
    }

    /// - Parameters:
    ///   - rate: messages per second; nil sends them as fast as the producer takes them.
    ///   - message: the key, value and paymentSeq of message `i`.
    /// - Returns: when each paymentSeq was sent.
    func produce(
        count: Int, rate: Double?, message: @escaping @Sendable (Int) -> (key: String, value: String, seq: String)
    ) async throws -> [String: Date] {
        try await produce(count: count, rate: rate) { i -> (key: String, value: [UInt8], seq: String?) in
            let (key, value, seq) = message(i)
            return (key, Array(value.utf8), seq)
        }
    }

    /// - Parameters:
    ///   - rate: messages per second; nil sends them as fast as the producer takes them.
    ///   - message: the key and value of message `i`, and the paymentSeq it is timed under (nil: not timed).
    /// - Returns: when each timed paymentSeq was sent.
    func produce(
        count: Int, rate: Double?,
        message: @escaping @Sendable (Int) -> (key: String, value: [UInt8], seq: String?)
    ) async throws -> [String: Date] {
        // A rate of 0 (or not a number) would never release a message, and wait for ever.
        if let rate, !(rate.isFinite && rate > 0) {
            throw PipelineBenchmark.Failure(
                description: "a rate is a positive number of messages per second, not \(rate)")
        }
        let producer = self.producer
        let topic = self.topic
        var sent: [String: Date] = [:]
        sent.reserveCapacity(count)
        let started = ContinuousClock.now
        let tick: Duration = .milliseconds(10)
        // Discarding: a finished send is forgotten at once (a soak sends about a million; a plain group kept each).
        try await withThrowingDiscardingTaskGroup { group in
            var next = 0
            var ticks = 0
            while next < count {
                // At a rate: release what is due by the next tick; otherwise everything, in chunks.
                let due =
                    rate.map { min(count, Int((Double(ticks + 1) * 0.01 * $0).rounded(.up))) }
                    ?? min(count, next + 1_000)
                while next < due {
                    let (key, value, seq) = message(next)
                    if let seq { sent[seq] = Date() }
                    let record = KafkaProducerRecord(topic: topic, key: Array(key.utf8), value: value)
                    group.addTask { _ = try await producer.send(record) }
                    next += 1
                }
                ticks += 1
                if rate != nil {
                    try await Task.sleep(until: started + tick * ticks, clock: .continuous)
                } else {
                    await Task.yield()
                }
            }
        }
        return sent
    }
}

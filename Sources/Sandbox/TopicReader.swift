import Foundation
import Kafka
import Logging
import Synchronization

/// Reads everything published so far on some topics, with a consumer group of its own.
public enum TopicReader {
    /// The records on `topics`, read until none has arrived for `quiet` (after the group's first assignment,
    /// which takes about 3 s on the mock broker).
    public static func readAll(
        _ topics: [String], bootstrapServers: String, quiet: Duration = .seconds(2), logger: Logger
    ) async throws -> [KafkaMessage] {
        let consumer = try KafkaConsumer(
            configuration: .init(
                bootstrapServers: bootstrapServers, groupID: "reader-\(UUID().uuidString.prefix(8))",
                properties: ["session.timeout.ms": "6000"]),
            logger: logger)
        try consumer.subscribe(topics: topics)
        let progress = Progress()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for try await message in consumer.messages {
                    progress.state.withLock {
                        $0.messages.append(message)
                        $0.lastArrival = .now
                    }
                }
            }
            while ContinuousClock.now - progress.state.withLock({ $0.lastArrival }) < quiet {
                try await Task.sleep(for: .milliseconds(100))
            }
            group.cancelAll()
        }
        await consumer.close()
        return progress.state.withLock { $0.messages }
    }

    private final class Progress: Sendable {
        struct State {
            var messages: [KafkaMessage] = []
            var lastArrival: ContinuousClock.Instant = .now + .seconds(4)
        }
        let state = Mutex(State())
    }
}

import Kafka
import Logging

extension KafkaProducer {
    /// Sends `records` together to `bootstrapServers`, so that the producer puts them in one batch (a linger longer
    /// than the sends take): what a broker whose latest-offset answer is its last batch's first offset + 1 (Tansu)
    /// gets wrong, and what the tests of readers that stop at a partition's end produce.
    public static func sendInOneBatch(
        _ records: [KafkaProducerRecord], bootstrapServers: String, logger: Logger
    ) async throws {
        let producer = try KafkaProducer(
            configuration: .init(bootstrapServers: bootstrapServers, properties: ["linger.ms": "200"]), logger: logger)
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for record in records { group.addTask { _ = try await producer.send(record) } }
                try await group.waitForAll()
            }
        } catch {
            await producer.close()
            throw error
        }
        await producer.close()
    }
}

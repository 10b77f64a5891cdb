import Fulfilment
import Kafka

/// Publishes the flow's records with the Kafka producer; returns once the broker acknowledged them.
public struct KafkaEventPublisher: EventPublisher {
    public let producer: KafkaProducer

    public init(producer: KafkaProducer) {
        self.producer = producer
    }

    public func publish(_ record: OutboundRecord) async throws {
        _ = try await publishLocated(record)
    }

    public func publishLocated(_ record: OutboundRecord) async throws -> RecordLocation? {
        let report = try await producer.send(
            KafkaProducerRecord(
                topic: record.topic, key: record.key, value: record.value,
                headers: record.headers.map { KafkaHeader(name: $0.name, value: $0.value) }))
        return RecordLocation(topic: report.topic, partition: report.partition, offset: report.offset)
    }

    public func isRecordTooLarge(_ error: any Error) -> Bool {
        guard let code = (error as? KafkaError)?.rdKafkaCode else { return false }
        return code == .messageSizeTooLarge || code == .recordListTooLarge
    }
}

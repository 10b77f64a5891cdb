import Fulfilment
import Kafka

/// The purchase source over a Kafka group consumer: records copied out of librdkafka by its poll thread, rebalances
/// served on that thread, offsets stored for librdkafka to commit.
final class KafkaPurchaseSource: PurchaseSource {
    let consumer: KafkaConsumer

    init(consumer: KafkaConsumer) {
        self.consumer = consumer
    }

    func start(topic: String, onRebalance: @escaping @Sendable (SourceRebalance) -> Void) throws {
        let consumer = consumer
        consumer.setRebalanceHandler { event in
            switch event {
            case .assigned(let partitions):
                var epochs: [SourcePartition: UInt64] = [:]
                for partition in partitions {
                    epochs[SourcePartition(partition.topic, partition.partition)] =
                        consumer.assignmentEpoch(for: partition) ?? 0
                }
                onRebalance(.assigned(epochs))
            case .revoking(let partitions):
                onRebalance(.revoking(partitions.map(\.source)))
            case .lost(let partitions):
                onRebalance(.lost(partitions.map(\.source)))
            }
        }
        try consumer.subscribe(topics: [topic])
    }

    func nextBatch(limit: Int, byteLimit: Int) async throws -> [SourcedRecord] {
        // The iterator holds no state of its own (the consumer's buffer does): one task reads, the engine.
        var iterator = consumer.messages.makeAsyncIterator()
        let batch = try await iterator.nextBatch(limit: limit, byteLimit: byteLimit)
        var records: [SourcedRecord] = []
        records.reserveCapacity(batch.count)
        for message in batch {
            records.append(
                SourcedRecord(
                    input: message.purchaseInput(), assignmentEpoch: message.assignmentEpoch,
                    byteCount: message.byteCount))
        }
        return records
    }

    func storeOffsets(_ offsets: [SourcePartition: Int64]) throws {
        var stored: [TopicPartition: Int64] = [:]
        for (partition, offset) in offsets { stored[TopicPartition(partition.topic, partition.partition)] = offset }
        try consumer.storeOffsets(stored)
    }

    var assignment: [SourcePartition] { consumer.assignment.map(\.source) }

    func pause(_ partitions: [SourcePartition]) {
        consumer.pause(partitions.map { TopicPartition($0.topic, $0.partition) })
    }

    func resume(_ partitions: [SourcePartition]) {
        consumer.resume(partitions.map { TopicPartition($0.topic, $0.partition) })
    }

    func initiateClose() { consumer.initiateClose() }

    func close() async { await consumer.close() }
}

extension TopicPartition {
    var source: SourcePartition { SourcePartition(topic, partition) }
}

extension KafkaMessage {
    /// The record as the flow takes it.
    func purchaseInput(provenanceTrusted: Bool = false) -> PurchaseInput {
        PurchaseInput(
            key: key, value: value, headers: headers.map { RecordHeader(name: $0.name, value: $0.value) },
            source: MessageSource(topic: topic, partition: partition, offset: offset),
            timestampMilliseconds: timestampMilliseconds, provenanceTrusted: provenanceTrusted)
    }
}

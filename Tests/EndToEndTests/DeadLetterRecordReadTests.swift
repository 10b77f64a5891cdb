import App
import Foundation
import Kafka
import KafkaTesting
import Logging
import Testing

/// The console's dead-letter record reads (`console.show_payloads`) against the broker under test: every record of a
/// batch is found at its offset, including on a broker whose latest-offset answer lags its log (Tansu), and an offset
/// the partition does not hold is no record.
@Suite("Reading one dead-lettered record", .timeLimit(.minutes(2)))
struct DeadLetterRecordReadTests {
    @Test func everyRecordOfABatchIsFoundAtItsOffsetAndNoneOutsideThePartition() async throws {
        let cluster = try KafkaEndpointKind.underTest.start(logger: EndToEndSystem.logger)
        try cluster.createTopic("purchase.completed.dlq", partitions: 1)
        let producer = try KafkaProducer(
            configuration: .init(bootstrapServers: cluster.bootstrapServers, properties: ["linger.ms": "200"]),
            logger: EndToEndSystem.logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<4 {
                group.addTask {
                    _ = try await producer.send(
                        KafkaProducerRecord(
                            topic: "purchase.completed.dlq", partition: 0, value: Array("record-\(index)".utf8)))
                }
            }
            try await group.waitForAll()
        }
        await producer.close()
        var configuration = WorkerConfiguration()
        configuration.bootstrapServers = cluster.bootstrapServers
        let records = KafkaDeadLetterRecords(configuration: configuration, logger: EndToEndSystem.logger)
        var found: [String] = []
        for offset in 0..<4 {
            found.append(
                try await records.value(partition: 0, offset: Int64(offset)).map { String(decoding: $0, as: UTF8.self) }
                    ?? "none")
        }
        #expect(Set(found) == ["record-0", "record-1", "record-2", "record-3"], "\(found)")
        #expect(try await records.value(partition: 0, offset: 4) == nil, "the end holds no record")
        #expect(try await records.value(partition: 0, offset: 40) == nil, "past the end: no record, no reset")
        #expect(try await records.value(partition: 1, offset: 0) == nil, "no such partition")
    }
}

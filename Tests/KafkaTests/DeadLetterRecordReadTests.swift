import App
import Foundation
import IAPTestSupport
import Kafka
import KafkaTesting
import Logging
import Testing

/// The console's dead-letter record reads (`console.show_payloads`) against the broker under test: every record of a
/// batch is found at its offset, including on a broker whose latest-offset answer lags its log (Tansu), and an offset
/// the partition does not hold is no record.
@Suite("Reading one dead-lettered record", .timeLimit(.minutes(2)), .tags(.librdkafka))
struct DeadLetterRecordReadTests {
    @Test func everyRecordOfABatchIsFoundAtItsOffsetAndNoneOutsideThePartition() async throws {
        let cluster = try KafkaEndpointKind.underTest.start(logger: KafkaTestSupport.logger)
        try cluster.createTopic("purchase.completed.dlq", partitions: 1)
        try await KafkaProducer.sendInOneBatch(
            (0..<4).map {
                KafkaProducerRecord(topic: "purchase.completed.dlq", partition: 0, value: Array("record-\($0)".utf8))
            }, bootstrapServers: cluster.bootstrapServers, logger: KafkaTestSupport.logger)
        var configuration = WorkerConfiguration()
        configuration.bootstrapServers = cluster.bootstrapServers
        let records = KafkaDeadLetterRecords(configuration: configuration, logger: KafkaTestSupport.logger)
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
        #expect(try await records.value(partition: -1, offset: 0) == nil, "no such partition")
        // Offsets from a URL: below the log start, or further out than one batch past the end, are refused at once.
        for offset: Int64 in [-1, .min, .max, 4 + 10_000] {
            let started = ContinuousClock.now
            #expect(try await records.value(partition: 0, offset: offset) == nil, "\(offset)")
            #expect(ContinuousClock.now - started < .seconds(3), "\(offset) answered without waiting for a record")
        }
    }
}

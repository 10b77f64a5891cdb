import Foundation
import IAPTestSupport
import Kafka
import KafkaTesting
import Testing

@testable import Kafka

/// The poll thread hands over what a fetch brought in one append, and the engine takes it in one call: fewer wakes
/// per message, with every message still delivered once, in order, and the buffer's bounds kept.
@Suite("Kafka batched fetch", .timeLimit(.minutes(2)), .tags(.librdkafka))
struct KafkaBatchFetchTests {
    @Test func messagesOfAFetchArriveTogetherInOrderAndEachOnce() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        try cluster.createTopic("batched", partitions: 2)
        let producer = try KafkaTestSupport.producer(cluster)
        for i in 0..<400 {
            try await producer.send(
                KafkaProducerRecord(topic: "batched", partition: Int32(i % 2), value: Array("r\(i)".utf8)))
        }
        await producer.close()
        let consumer = try KafkaTestSupport.consumer(cluster, group: KafkaTestSupport.uniqueGroup())
        try consumer.subscribe(topics: ["batched"])
        var iterator = consumer.messages.makeAsyncIterator()
        var offsets: [Int32: [Int64]] = [:]
        var largest = 0
        let deadline = ContinuousClock.now + .seconds(40)
        while offsets.values.map(\.count).reduce(0, +) < 400, ContinuousClock.now < deadline {
            let batch = try await iterator.nextBatch(limit: 64)
            #expect(!batch.isEmpty && batch.count <= 64)
            largest = max(largest, batch.count)
            for message in batch { offsets[message.partition, default: []].append(message.offset) }
        }
        #expect(
            offsets[0] == Array(0..<200) && offsets[1] == Array(0..<200), "every offset once, in order per partition")
        #expect(largest > 1, "a fetch of 400 records was taken more than one message at a time")
        await consumer.close()
    }

    @Test func aBatchWaitsForTheNextMessageWhenNothingIsBufferedAndEndsEmptyWhenFinished() async throws {
        let buffer = MessageBuffer()
        let waiting = Task { try await buffer.nextBatch(limit: 10) }
        try await Task.sleep(for: .milliseconds(50))
        buffer.append(contentsOf: (Int64(0)..<3).map { KafkaMessage(topic: "t", partition: 0, offset: $0, value: []) })
        #expect(try await waiting.value.map(\.offset) == [0], "the waiting call gets the first message at once")
        #expect(try await buffer.nextBatch(limit: 10).map(\.offset) == [1, 2], "the rest stayed buffered, in order")
        #expect(buffer.count == 0 && buffer.bytes == 0)
        buffer.append(
            contentsOf: (Int64(3)..<8).map { KafkaMessage(topic: "t", partition: 0, offset: $0, value: [1, 2]) })
        #expect(try await buffer.nextBatch(limit: 2).map(\.offset) == [3, 4], "at most the limit")
        #expect(buffer.count == 3)
        buffer.finish()
        #expect(try await buffer.nextBatch(limit: 10).isEmpty, "a finished buffer drops what it held and ends")
    }

    @Test func aBatchStopsAtItsByteLimitButAlwaysTakesOneMessage() async throws {
        let buffer = MessageBuffer()
        let record = [UInt8](repeating: 1, count: 1_000)
        buffer.append(
            contentsOf: (Int64(0)..<5).map { KafkaMessage(topic: "t", partition: 0, offset: $0, value: record) })
        let size = try #require(buffer.bytes / 5 as Int?)
        #expect(try await buffer.nextBatch(limit: 64, byteLimit: 2 * size).map(\.offset) == [0, 1])
        #expect(
            try await buffer.nextBatch(limit: 64, byteLimit: 10).map(\.offset) == [2], "one message even over the limit"
        )
        #expect(buffer.bytes == 2 * size, "the bytes of what stays are still counted")
    }
}

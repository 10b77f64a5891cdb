import Foundation
import IAPTestSupport
import Kafka
import KafkaTesting
import Testing

@testable import Kafka

/// What the consumer holds in memory: fetched messages wait in a buffer bounded in messages and in bytes, and a
/// timed wait for the next message never loses one.
@Suite("Kafka consumer buffer bounds", .timeLimit(.minutes(2)), .tags(.librdkafka))
struct KafkaBufferBoundsTests {
    /// Each header costs memory beyond its bytes: a record of empty headers is counted at what it holds, so the
    /// byte bound holds for it too.
    @Test func aRecordOfManyEmptyHeadersCountsWhatItHolds() {
        let headers = Array(repeating: KafkaHeader(name: "", value: nil), count: 100_000)
        let message = KafkaMessage(topic: "t", partition: 0, offset: 0, value: [], headers: headers)
        #expect(message.byteCount >= 100_000 * 100, "\(message.byteCount) bytes counted for 100,000 headers")
    }

    @Test func aBurstOfLargeRecordsIsBufferedOnlyUpToTheByteBound() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        try cluster.createTopic("large", partitions: 2)
        let producer = try KafkaTestSupport.producer(cluster, extra: ["message.max.bytes": "2000000"])
        let record = [UInt8](repeating: 7, count: 100_000)
        for i in 0..<60 {
            try await producer.send(KafkaProducerRecord(topic: "large", partition: Int32(i % 2), value: record))
        }
        await producer.close()
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers, groupID: KafkaTestSupport.uniqueGroup(),
                maxBufferedMessages: 10_000,
                maxBufferedBytes: 1_000_000,
                properties: [
                    "session.timeout.ms": "3000", "heartbeat.interval.ms": "300", "queued.max.messages.kbytes": "1024",
                ]),
            logger: KafkaTestSupport.logger)
        try consumer.subscribe(topics: ["large"])
        // Nothing is taken: the buffer fills up to its byte bound, then fetching pauses.
        var highest = 0
        let deadline = ContinuousClock.now + .seconds(12)
        while ContinuousClock.now < deadline {
            highest = max(highest, consumer.core.buffer.bytes)
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(highest >= 1_000_000, "the buffer filled to its bound (\(highest) bytes)")
        #expect(highest <= 1_000_000 + record.count * 2, "6 MB were fetchable; \(highest) bytes were held")
        #expect(consumer.core.buffer.count < 60)
        // Taking messages frees room, and every record still arrives.
        let all = try await KafkaTestSupport.take(60, from: consumer, within: 30)
        #expect(all.count == 60)
        await consumer.close()
    }

    @Test func aTimedWaitThatEndsAsAMessageArrivesLosesNothing() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        try cluster.createTopic("timed", partitions: 1)
        let producer = try KafkaTestSupport.producer(cluster)
        let consumer = try KafkaTestSupport.consumer(cluster, group: KafkaTestSupport.uniqueGroup())
        try consumer.subscribe(topics: ["timed"])
        var iterator = consumer.messages.makeAsyncIterator()
        var received: [Int64] = []
        var timeouts = 0
        // Short waits racing 50 records produced meanwhile: each record is either returned or still buffered.
        let sending = Task {
            for i in 0..<50 {
                try await producer.send(KafkaProducerRecord(topic: "timed", value: Array("r\(i)".utf8)))
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...15)))
            }
        }
        let deadline = ContinuousClock.now + .seconds(40)
        while received.count < 50, ContinuousClock.now < deadline {
            switch try await iterator.next(within: .milliseconds(Int.random(in: 1...12))) {
            case .message(let message): received.append(message.offset)
            case .timedOut: timeouts += 1
            case .ended: break
            }
        }
        try await sending.value
        #expect(received == Array(0..<50), "every offset once, in order")
        #expect(timeouts > 0)
        await producer.close()
        await consumer.close()
    }
}

import IAPTestSupport
import Kafka
import KafkaTesting
import Testing

@Suite("Kafka round trip", .timeLimit(.minutes(2)), .tags(.librdkafka))
struct KafkaRoundTripTests {
    @Test func recordsArriveWithKeysHeadersAndExactBytes() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 3)
        try cluster.createTopic("round-trip", partitions: 12)
        let producer = try KafkaTestSupport.producer(cluster, extra: ["message.max.bytes": "4000000"])
        let big = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let binary: [UInt8] = [0, 255, 1, 254, 0, 0, 10, 13]
        var records: [KafkaProducerRecord] = [
            KafkaProducerRecord(
                topic: "round-trip", key: Array("user-1".utf8), value: Array("hello".utf8),
                headers: [KafkaHeader(name: "h1", string: "v1"), KafkaHeader(name: "empty", value: nil)]),
            KafkaProducerRecord(topic: "round-trip", key: nil, value: binary),
            KafkaProducerRecord(topic: "round-trip", key: Array("empty".utf8), value: []),
            KafkaProducerRecord(topic: "round-trip", partition: 3, key: Array("big".utf8), value: big),
        ]
        for i in 0..<96 {
            records.append(
                KafkaProducerRecord(topic: "round-trip", partition: Int32(i % 12), value: Array("p\(i)".utf8)))
        }
        var reports: [KafkaDeliveryReport] = []
        for record in records { reports.append(try await producer.send(record)) }
        #expect(reports[3].partition == 3)
        #expect(Set(reports.map(\.partition)).count == 12)

        let consumer = try KafkaTestSupport.consumer(
            cluster, group: KafkaTestSupport.uniqueGroup(), extra: ["fetch.max.bytes": "8000000"])
        try consumer.subscribe(topics: ["round-trip"])
        let messages = try await KafkaTestSupport.take(records.count, from: consumer, within: 30)
        #expect(messages.count == records.count)

        let hello = try #require(messages.first { $0.key == Array("user-1".utf8) })
        #expect(hello.value == Array("hello".utf8))
        #expect(hello.headers == [KafkaHeader(name: "h1", string: "v1"), KafkaHeader(name: "empty", value: nil)])
        #expect(hello.headers.string(named: "h1") == "v1")
        #expect(hello.timestampMilliseconds != nil)
        #expect(messages.contains { $0.key == nil && $0.value == binary })
        #expect(messages.contains { $0.key == Array("empty".utf8) && $0.value.isEmpty })
        let bigMessage = try #require(messages.first { $0.key == Array("big".utf8) })
        #expect(bigMessage.partition == 3)
        #expect(bigMessage.value == big)
        // Per partition, offsets arrive in order.
        for partition in Set(messages.map(\.partition)) {
            let offsets = messages.filter { $0.partition == partition }.map(\.offset)
            #expect(offsets == offsets.sorted())
        }
        await consumer.close()
        await producer.close()
    }

    @Test func storedOffsetsAreCommittedAndResumedFrom() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        try cluster.createTopic("resume", partitions: 1)
        let producer = try KafkaTestSupport.producer(cluster)
        try await KafkaTestSupport.produce(producer, topic: "resume", range: 0..<10)
        let group = KafkaTestSupport.uniqueGroup()

        let first = try KafkaTestSupport.consumer(cluster, group: group)
        try first.subscribe(topics: ["resume"])
        let taken = try await KafkaTestSupport.take(10, from: first)
        let sixth = try #require(taken.sorted { $0.offset < $1.offset }.dropFirst(5).first)
        // Only the first six are finished; the rest must come again.
        try first.storeOffset(for: sixth)
        try await first.commit()
        let committed = try await first.committedOffsets(for: [TopicPartition("resume", 0)])
        #expect(committed[TopicPartition("resume", 0)] == .some(sixth.offset + 1))
        await first.close()

        let second = try KafkaTestSupport.consumer(cluster, group: group)
        try second.subscribe(topics: ["resume"])
        let again = try await KafkaTestSupport.take(4, from: second)
        #expect(again.map(\.offset) == Array((sixth.offset + 1)...(sixth.offset + 4)))
        await second.close()
        await producer.close()
    }

    /// A pause belongs to an assignment: one asked for a partition this member does not own (the engine read its
    /// assignment while the poll thread revoked it) must not be applied when the partition is assigned later.
    @Test func aPauseOfAPartitionNotAssignedIsNotAppliedWhenItIsAssignedLater() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        try cluster.createTopic("late-pause", partitions: 1)
        let producer = try KafkaTestSupport.producer(cluster)
        try await KafkaTestSupport.produce(producer, topic: "late-pause", range: 0..<3)
        let consumer = try KafkaTestSupport.consumer(cluster, group: KafkaTestSupport.uniqueGroup())
        consumer.pause([TopicPartition("late-pause", 0)])
        try consumer.subscribe(topics: ["late-pause"])
        let taken = try await KafkaTestSupport.take(3, from: consumer, within: 15)
        #expect(taken.count == 3, "the partition stayed paused after it was assigned")
        await consumer.close()
        await producer.close()
    }
}

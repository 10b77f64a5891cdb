import App
import CRdKafka
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

    /// librdkafka's byte bound on what it fetches ahead (`queued.max.messages.kbytes`) counts values alone, so on a
    /// backlog of small records it held nearly the whole topic; the worker's consumers bound it in records too
    /// (`queued.min.messages`, WorkerConfiguration). This holds librdkafka to the worker's own properties: a consumer
    /// that takes nothing holds the bound plus one fetch's answer per partition, where the byte bound alone lets it
    /// hold every record. Then every record still arrives: a queue drained below the bound is fetched for again
    /// (from librdkafka 2.2 after the worker's `fetch.queue.backoff.ms`). (The worker's 64 KiB per partition and
    /// fetch, `max.partition.fetch.bytes`, is not what this holds: a Kafka broker keeps its answer near it, but the
    /// mock answers each partition with one producer batch whatever the limit, and Tansu with more than the limit.)
    @Test(arguments: [false, true])
    func librdkafkaFetchesAheadAboutItsRecordBound(boundedInRecords: Bool) async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        let topic = "backlog"
        try cluster.createTopic(topic, partitions: 4)
        // Batches of 100 records, as a producer at a modest rate writes them: a fetch returns whole batches.
        let producer = try KafkaTestSupport.producer(cluster, extra: ["batch.num.messages": "100"])
        let records = 20_000
        let filler = String(repeating: "x", count: 180)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<records {
                group.addTask {
                    try await producer.send(
                        KafkaProducerRecord(topic: topic, partition: Int32(i % 4), value: Array("\(i)-\(filler)".utf8)))
                }
            }
            try await group.waitForAll()
        }
        await producer.close()

        // The worker's consumer at worker.max_in_flight 250: a bound of 2,000 records.
        var worker = WorkerConfiguration()
        worker.maxInFlight = 250
        let bound = 2_000
        let shipped = worker.consumerConfiguration.kafka
        #expect(shipped["queued.min.messages"] == String(bound))
        var properties = [
            "bootstrap.servers": cluster.bootstrapServers, "group.id": KafkaTestSupport.uniqueGroup(),
            "enable.auto.commit": "false",
            "queued.max.messages.kbytes": shipped["queued.max.messages.kbytes"] ?? "",
        ]
        if boundedInRecords {
            for key in ["queued.min.messages", "max.partition.fetch.bytes", "fetch.queue.backoff.ms"] {
                properties[key] = shipped[key]
            }
        }
        let conf = rd_kafka_conf_new()!
        var error = [CChar](repeating: 0, count: 256)
        var refused: [String] = []
        for (key, value) in properties {
            if rd_kafka_conf_set(conf, key, value, &error, error.count) != RD_KAFKA_CONF_OK { refused.append(key) }
        }
        guard refused.isEmpty, let handle = rd_kafka_new(RD_KAFKA_CONSUMER, conf, &error, error.count) else {
            rd_kafka_conf_destroy(conf)  // still ours when the handle was not made
            let reason = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            Issue.record("librdkafka refused \(refused): \(reason)")
            return
        }
        // Closed below when the test gets there; an implicit close in destroy can hang (RDKafkaClient.deinit).
        defer { rd_kafka_destroy_flags(handle, Int32(RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE)) }
        rd_kafka_poll_set_consumer(handle)
        let list = rd_kafka_topic_partition_list_new(4)!
        for partition in Int32(0)..<4 {
            rd_kafka_topic_partition_list_add(list, topic, partition)!.pointee.offset = Int64(RD_KAFKA_OFFSET_BEGINNING)
        }
        #expect(rd_kafka_assign(handle, list) == RD_KAFKA_RESP_ERR_NO_ERROR)
        rd_kafka_topic_partition_list_destroy(list)
        let queue = rd_kafka_queue_get_consumer(handle)!
        defer { rd_kafka_queue_destroy(queue) }

        // Nothing is taken: librdkafka fetches what its bounds allow, then waits. The queue is read until it has not
        // grown for two seconds (20 s at most). Its length counts its few events too.
        var held = 0
        var still = 0
        let settling = ContinuousClock.now + .seconds(20)
        while still < 20, ContinuousClock.now < settling {
            let length = Int(rd_kafka_queue_length(queue))
            still = length > held || length == 0 ? 0 : still + 1
            held = max(held, length)
            try await Task.sleep(for: .milliseconds(100))
        }
        if boundedInRecords {
            #expect(held >= bound, "librdkafka fetched up to its bound: \(held) records held")
            if KafkaEndpointKind.underTest == .mock {
                // One batch of 100 per partition over the bound, and a few events.
                #expect(held <= bound + 4 * 100 + 20, "librdkafka held \(held) records")
            } else {
                // Tansu answers a partition with more (5,004 records held in one run, about 750 per partition).
                #expect(held <= records / 2, "librdkafka held \(held) records")
            }
        } else {
            #expect(held >= records, "the byte bound alone let librdkafka hold \(held) of \(records) records")
        }

        // Taking them all: the bound slows nothing to a stop.
        var taken = 0
        let deadline = ContinuousClock.now + .seconds(40)
        while taken < records, ContinuousClock.now < deadline {
            guard let message = rd_kafka_consumer_poll(handle, 100) else { continue }
            if message.pointee.err == RD_KAFKA_RESP_ERR_NO_ERROR { taken += 1 }
            rd_kafka_message_destroy(message)
        }
        #expect(taken == records)
        rd_kafka_consumer_close(handle)
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

import IAPTestSupport
import Kafka
import KafkaTesting
import Testing

@Suite("Kafka errors", .timeLimit(.minutes(1)), .tags(.librdkafka))
struct KafkaErrorTests {
    @Test func unknownPropertyIsAConfigurationErrorNamingIt() throws {
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaProducer(
                configuration: KafkaProducerConfiguration(
                    bootstrapServers: "127.0.0.1:9", properties: ["no.such.property": "1"]),
                logger: KafkaTestSupport.logger)
        }
        #expect(error?.code == .configuration)
        #expect(error?.description.contains("no.such.property") == true)
    }

    @Test func badValueIsAConfigurationErrorWithLibrdkafkasMessage() throws {
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaConsumer(
                configuration: KafkaConsumerConfiguration(
                    bootstrapServers: "127.0.0.1:9", groupID: "g", properties: ["session.timeout.ms": "banana"]),
                logger: KafkaTestSupport.logger)
        }
        #expect(error?.code == .configuration)
        #expect(error?.message.contains("session.timeout.ms") == true)
    }

    @Test func aRejectedSecretValueIsNotEchoed() throws {
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaProducer(
                configuration: KafkaProducerConfiguration(
                    bootstrapServers: "127.0.0.1:9",
                    properties: [
                        "security.protocol": "ssl", "ssl.key.password": "hunter2",
                        "ssl.key.location": "/nonexistent/key.pem",
                    ]),
                logger: KafkaTestSupport.logger)
        }
        #expect(error != nil)
        #expect(error?.description.contains("hunter2") == false)
        let shown = KafkaConfiguration(bootstrapServers: "b:9092", properties: ["sasl.password": "hunter2"]).redacted
        #expect(shown.contains { $0.key == "sasl.password" && $0.value == "<redacted>" })
    }

    @Test(.mockClusterOnly("sets a topic error")) func producingToAMissingTopicReportsTheError() async throws {
        let cluster = try MockCluster(brokers: 1, logger: KafkaTestSupport.logger)
        try cluster.createTopic("exists", partitions: 1)
        cluster.setTopicError("missing", error: .unknownTopicOrPartition)
        let producer = try KafkaTestSupport.producer(cluster, extra: ["message.timeout.ms": "2000"])
        let error = await #expect(throws: KafkaError.self) {
            try await producer.send(KafkaProducerRecord(topic: "missing", value: Array("x".utf8)))
        }
        #expect(error?.code == .delivery || error?.code == .produce)
        // The producer is still usable for topics that exist.
        let report = try await producer.send(KafkaProducerRecord(topic: "exists", value: Array("y".utf8)))
        #expect(report.topic == "exists")
        await producer.close()
    }

    @Test func producingToAPartitionThatDoesNotExistFails() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        try cluster.createTopic("two", partitions: 2)
        let producer = try KafkaTestSupport.producer(cluster, extra: ["message.timeout.ms": "2000"])
        _ = try await producer.send(KafkaProducerRecord(topic: "two", value: Array("warm".utf8)))
        let error = await #expect(throws: KafkaError.self) {
            try await producer.send(KafkaProducerRecord(topic: "two", partition: 7, value: Array("x".utf8)))
        }
        #expect(error?.rdKafkaCode == .unknownPartition)
        await producer.close()
    }

    @Test func sendAfterCloseIsAClearError() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        let producer = try KafkaTestSupport.producer(cluster)
        await producer.close()
        let error = await #expect(throws: KafkaError.self) {
            try await producer.send(KafkaProducerRecord(topic: "t", value: []))
        }
        #expect(error?.code == .closed)
    }
}

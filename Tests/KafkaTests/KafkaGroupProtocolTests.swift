import Foundation
import IAPTestSupport
import Kafka
import KafkaTesting
import Testing

/// The next-generation consumer group protocol (KIP-848, `group.protocol=consumer`): the consumer sets none of the
/// classic protocol's properties, a librdkafka that does not know the protocol refuses it with its own words, and one
/// that does (2.12 or later) consumes with it on the mock cluster.
@Suite("The consumer group protocol (KIP-848)", .timeLimit(.minutes(2)), .tags(.librdkafka))
struct KafkaGroupProtocolTests {
    @Test func theConsumerProtocolGetsNoneOfTheClassicDefaults() {
        let classic = KafkaConsumerConfiguration(bootstrapServers: "b:9092", groupID: "g")
        #expect(classic.groupProtocolName == "classic")
        #expect(classic.effectiveProperties["partition.assignment.strategy"] == "cooperative-sticky")

        let next = KafkaConsumerConfiguration(
            bootstrapServers: "b:9092", groupID: "g", properties: ["group.protocol": "consumer"])
        #expect(next.groupProtocolName == "consumer")
        for spelling in [" consumer", "Consumer\t", "CONSUMER"] {
            #expect(KafkaConsumerConfiguration.namesConsumerGroupProtocol(spelling), "librdkafka reads \(spelling) so")
        }
        #expect(!KafkaConsumerConfiguration.namesConsumerGroupProtocol("classic"))
        let properties = next.effectiveProperties
        for key in KafkaConsumerConfiguration.classicGroupProtocolProperties {
            #expect(properties[key] == nil, "\(key) is not set under group.protocol=consumer")
        }
    }

    @Test(
        .enabled(
            if: !Librdkafka.version.knowsConsumerGroupProtocol,
            "needs a librdkafka that does not know group.protocol (before 2.4.0, e.g. Debian 12's 2.0.2)"))
    func aLibrdkafkaThatDoesNotKnowTheProtocolRefusesItWithItsOwnWords() throws {
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaConsumer(
                configuration: KafkaConsumerConfiguration(
                    bootstrapServers: "127.0.0.1:1", groupID: "g", properties: ["group.protocol": "consumer"]),
                logger: KafkaTestSupport.logger)
        }
        #expect(error?.code == .configuration)
        #expect(error?.message.contains("group.protocol") == true, "\(error.map { "\($0)" } ?? "")")
    }

    @Test(
        .enabled(if: Librdkafka.consumerGroupProtocolIsGA, "needs librdkafka 2.12 or later"),
        .mockClusterOnly("Tansu 0.6 does not offer the consumer group protocol"))
    func aCurrentLibrdkafkaConsumesWithTheConsumerProtocolAndRefusesAClassicSetting() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        try cluster.createTopic("next", partitions: 2)
        let producer = try KafkaTestSupport.producer(cluster)
        try await KafkaTestSupport.produce(producer, topic: "next", range: 0..<10)
        let consumer = try KafkaConsumer(
            configuration: KafkaConsumerConfiguration(
                bootstrapServers: cluster.bootstrapServers, groupID: KafkaTestSupport.uniqueGroup(),
                properties: ["group.protocol": "consumer"]),
            logger: KafkaTestSupport.logger)
        try consumer.subscribe(topics: ["next"])
        let taken = try await KafkaTestSupport.take(10, from: consumer, within: 30)
        #expect(Set(taken.map(\.text)) == Set((0..<10).map { "value-\($0)" }))
        await consumer.close()
        await producer.close()

        // A classic setting given explicitly is the operator's: librdkafka refuses it, in its words.
        let error = #expect(throws: KafkaError.self) {
            _ = try KafkaConsumer(
                configuration: KafkaConsumerConfiguration(
                    bootstrapServers: cluster.bootstrapServers, groupID: "g",
                    properties: ["group.protocol": "consumer", "session.timeout.ms": "6000"]),
                logger: KafkaTestSupport.logger)
        }
        #expect(error?.message.contains("session.timeout.ms") == true, "\(error.map { "\($0)" } ?? "")")
    }
}

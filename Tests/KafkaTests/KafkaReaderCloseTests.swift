import Foundation
import IAPTestSupport
import KafkaTesting
import Testing

@testable import Kafka

/// A group-less reader never joins a group, so the librdkafka 2.0.2 assignor bug (#4312) that makes a group consumer
/// closed before its first assignment keep its handle cannot touch it: every reader is destroyed when it goes away
/// (the console opens one per record page, up to 4 a second).
@Suite("Closing Kafka readers", .timeLimit(.minutes(1)), .tags(.librdkafka))
struct KafkaReaderCloseTests {
    @Test func aReaderClosedBeforeAnyAssignmentIsDestroyedNotKept() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        // The default strategy is cooperative-sticky, the one the workaround is about.
        let (handle, client) = try await Self.closeAndRelease {
            try KafkaConsumer(
                configuration: .reader(bootstrapServers: cluster.bootstrapServers), logger: KafkaTestSupport.logger)
        }
        #expect(client == nil, "the client outlived its consumer")
        #expect(!KeptHandles.holds(handle: handle), "a reader's handle (threads, sockets) outlived it")
    }

    @Test func aGroupConsumerClosedBeforeItsFirstAssignmentIsKeptOnlyWhereTheBugApplies() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        let (handle, client) = try await Self.closeAndRelease {
            let consumer = try KafkaTestSupport.consumer(cluster, group: KafkaTestSupport.uniqueGroup())
            try consumer.subscribe(topics: ["reader-close"])
            return consumer
        }
        #expect(client == nil, "the client outlived its consumer")
        #expect(KeptHandles.holds(handle: handle) == Librdkafka.assignorStateBugApplies)
    }

    /// Makes a consumer, closes it, lets it go, and waits (5 s at most) until its client is gone: destroyed or kept.
    static func closeAndRelease(_ make: () throws -> KafkaConsumer) async throws -> (OpaquePointer, RDKafkaClient?) {
        var consumer: KafkaConsumer? = try make()
        let handle = try #require(consumer?.core.client.handle)
        weak let client = consumer?.core.client
        await consumer?.close()
        consumer = nil
        let deadline = ContinuousClock.now + .seconds(5)
        while client != nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        return (handle, client)
    }
}

import Foundation
import IAPTestSupport
import Kafka
import KafkaTesting
import Synchronization
import Testing

@testable import Kafka

/// Every partition a group assigns is read. librdkafka gives each pause, resume and fetch start of a partition a
/// version, and drops an operation that it serves after one of a newer version: a pause or resume issued while the
/// assignment starts a partition's fetch (its thread takes the version, ours takes the next and is served first) can
/// drop that start, and the partition is never read, with no error (librdkafka #5591; 2.0.2 versions a resume of a
/// partition that is not paused too). So the consumer settles a partition's pause before librdkafka takes it.
@Suite("Kafka partitions assigned are read", .timeLimit(.minutes(4)), .tags(.librdkafka))
struct KafkaAssignmentStartTests {
    /// A fresh member takes every partition of a topic, round after round: each one delivers its record.
    @Test func everyPartitionOfAFreshAssignmentDelivers() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 3)
        let partitions = 24
        try await KafkaTestSupport.fill(cluster, topic: "starts", partitions: partitions, perPartition: 1)
        for round in 0..<8 {
            let consumer = try KafkaTestSupport.consumer(cluster, group: KafkaTestSupport.uniqueGroup())
            try consumer.subscribe(topics: ["starts"])
            let taken = try await KafkaTestSupport.take(partitions, from: consumer, within: 15)
            #expect(Set(taken.map(\.partition)).count == partitions, "round \(round): partitions never read")
            await consumer.close()
        }
    }

    /// A member whose buffer is full when more partitions come to it (the other member left) takes them paused, and
    /// reads every one once it has room again: those not yet fetched are resumed once their fetch may have started.
    @Test func partitionsAssignedWhileTheBufferIsFullAreReadOnceThereIsRoom() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 3)
        let (partitions, perPartition) = (12, 30)
        try await KafkaTestSupport.fill(cluster, topic: "full", partitions: partitions, perPartition: perPartition)
        let group = KafkaTestSupport.uniqueGroup()
        let first = try KafkaTestSupport.consumer(cluster, group: group, maxBufferedMessages: 20)
        try first.subscribe(topics: ["full"])
        let second = try KafkaTestSupport.consumer(cluster, group: group)
        try second.subscribe(topics: ["full"])
        // Both members hold partitions; the first takes nothing, so its buffer fills and stays full.
        try await waitUntil("both members hold partitions", within: .seconds(60), every: .milliseconds(50)) {
            !first.core.control.withLock { $0.assignment.isEmpty }
                && !second.core.control.withLock { $0.assignment.isEmpty }
        }
        try await waitUntil("the first member's buffer is full", within: .seconds(30), every: .milliseconds(20)) {
            first.core.control.withLock { $0.bufferFull }
        }
        // The second leaves without reading: its partitions go to the first, whose buffer is still full.
        await second.close()
        try await waitUntil("the first member holds every partition", within: .seconds(60), every: .milliseconds(50)) {
            first.core.control.withLock { $0.assignment.count } == partitions
        }
        #expect(first.core.control.withLock { $0.bufferFull }, "the buffer was full when the partitions came")
        try await waitUntil("the partitions that came are paused", within: .seconds(10), every: .milliseconds(10)) {
            first.core.control.withLock { $0.physicallyPaused.count } == partitions
        }
        let taken = try await KafkaTestSupport.take(partitions * perPartition, from: first, within: 60)
        #expect(Set(taken.map(\.partition)).count == partitions, "partitions never read")
        #expect(Set(taken.map { "\($0.partition):\($0.offset)" }).count == partitions * perPartition)
        await first.close()
    }

    /// A member that holds its intake as its first partitions come (a worker started while Gamebase is down) pauses
    /// each once its fetch has started, and reads every record once it lets go.
    @Test func firstPartitionsPausedAsTheyAreAssignedAreReadOnceResumed() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 3)
        let (partitions, perPartition) = (12, 20)
        try await KafkaTestSupport.fill(cluster, topic: "held", partitions: partitions, perPartition: perPartition)
        let member = Mutex<KafkaConsumer?>(nil)
        let consumer = try KafkaTestSupport.consumer(cluster, group: KafkaTestSupport.uniqueGroup()) { event in
            if case .assigned(let assigned) = event { member.withLock { $0 }?.pause(assigned) }
        }
        member.withLock { $0 = consumer }
        try consumer.subscribe(topics: ["held"])
        try await waitUntil("every partition assigned and paused", within: .seconds(60), every: .milliseconds(20)) {
            consumer.core.control.withLock { control in
                control.assignment.count == partitions && control.physicallyPaused == control.assignment
            }
        }
        #expect(consumer.core.control.withLock { $0.unstarted.isEmpty })
        consumer.resume(Array(consumer.assignment))
        let taken = try await KafkaTestSupport.take(partitions * perPartition, from: consumer, within: 60)
        #expect(Set(taken.map { "\($0.partition):\($0.offset)" }).count == partitions * perPartition)
        await consumer.close()
    }

    /// With no statistics and no message to show that a new partition's fetch has started, its allowance does: a
    /// member holding its intake as its first partitions come pauses them once it has passed, and reads every record
    /// produced later once it lets go.
    @Test func withoutStatisticsOrMessagesTheAllowanceEndsTheWait() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        let partitions = 4
        try cluster.createTopic("quiet", partitions: partitions)
        let member = Mutex<KafkaConsumer?>(nil)
        let consumer = try KafkaTestSupport.consumer(
            cluster, group: KafkaTestSupport.uniqueGroup(),
            rebalanceHandler: { event in
                if case .assigned(let assigned) = event { member.withLock { $0 }?.pause(assigned) }
            }, extra: ["statistics.interval.ms": "0"])
        member.withLock { $0 = consumer }
        #expect(consumer.core.fetchStartAllowance == .seconds(3))
        try consumer.subscribe(topics: ["quiet"])
        try await waitUntil("every partition assigned and paused", within: .seconds(60), every: .milliseconds(20)) {
            consumer.core.control.withLock { control in
                control.assignment.count == partitions && control.physicallyPaused == control.assignment
                    && control.unstarted.isEmpty
            }
        }
        #expect(consumer.statistics == nil)
        consumer.resume(Array(consumer.assignment))
        let producer = try KafkaTestSupport.producer(cluster)
        for partition in 0..<partitions {
            try await producer.send(KafkaProducerRecord(topic: "quiet", partition: Int32(partition), value: [1]))
        }
        await producer.close()
        let taken = try await KafkaTestSupport.take(partitions, from: consumer, within: 30)
        #expect(Set(taken.map(\.partition)).count == partitions)
        await consumer.close()
    }

    /// What shows a partition's fetch started: its `fetch_state` in librdkafka's statistics, and when they were made.
    @Test func statisticsSayWhichFetchesHaveStartedAndWhen() throws {
        let json = """
            {"ts": 123456789, "msg_cnt": 0, "topics": {"t": {"partitions": {
              "0": {"fetch_state": "active", "consumer_lag": 3}, "1": {"fetch_state": "offset-query"},
              "2": {"fetch_state": "none"}, "3": {"fetch_state": "stopped"}, "4": {"fetch_state": "stopping"},
              "5": {}, "-1": {"fetch_state": "active"}}}}}
            """
        let statistics = try #require(KafkaStatistics(json: Array(json.utf8)))
        #expect(statistics.fetchStarted == [TopicPartition("t", 0), TopicPartition("t", 1)])
        #expect(statistics.monotonicMicroseconds == 123_456_789)
        #expect(KafkaStatistics(json: Array(#"{"topics": {}}"#.utf8))?.monotonicMicroseconds == nil)
    }

    /// How long a new partition waits for a sign that its fetch started before it is assumed to have: three statistics
    /// intervals and a minute at least, or 3 s when librdkafka sends none.
    @Test func theAllowanceFollowsTheStatisticsInterval() {
        #expect(ConsumerCore.fetchStartAllowance(statisticsInterval: nil) == .seconds(3))
        #expect(ConsumerCore.fetchStartAllowance(statisticsInterval: "0") == .seconds(3))
        #expect(ConsumerCore.fetchStartAllowance(statisticsInterval: "5000") == .seconds(60))
        #expect(ConsumerCore.fetchStartAllowance(statisticsInterval: " 5000 ") == .seconds(60))
        #expect(ConsumerCore.fetchStartAllowance(statisticsInterval: "120000") == .seconds(360))
        #expect(ConsumerCore.fetchStartAllowance(statisticsInterval: "soon") == .seconds(3))
    }

    /// librdkafka's statistics are stamped on the clock the consumer compares them with (`CLOCK_MONOTONIC`), and show
    /// an assigned partition's fetch started.
    @Test func aConsumersStatisticsShowItsFetchStartedOnTheConsumersClock() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        try cluster.createTopic("stamped", partitions: 1)
        let consumer = try KafkaTestSupport.consumer(cluster, group: KafkaTestSupport.uniqueGroup())
        try consumer.subscribe(topics: ["stamped"])
        let assigned = UnstartedFetch.statisticsClockMicroseconds()
        try await waitUntil("statistics show the fetch started", within: .seconds(30), every: .milliseconds(50)) {
            consumer.statistics?.fetchStarted.contains(TopicPartition("stamped", 0)) == true
        }
        let made = try #require(consumer.statistics?.monotonicMicroseconds)
        let now = UnstartedFetch.statisticsClockMicroseconds()
        #expect(made > assigned && made <= now, "statistics made at \(made) µs, assigned at \(assigned), now \(now)")
        try await waitUntil("the partition is no longer unstarted", within: .seconds(10), every: .milliseconds(50)) {
            consumer.core.control.withLock { $0.unstarted.isEmpty }
        }
        await consumer.close()
    }
}

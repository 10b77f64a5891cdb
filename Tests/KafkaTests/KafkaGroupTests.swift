import IAPTestSupport
import Kafka
import KafkaTesting
import Synchronization
import Testing

@testable import Kafka

@Suite("Kafka consumer groups", .timeLimit(.minutes(3)), .tags(.librdkafka))
struct KafkaGroupTests {
    /// Runs a member that processes every message it gets until the test cancels it.
    private static func runMember(_ name: String, _ consumer: KafkaConsumer, log: ProcessedLog) async throws {
        for try await message in consumer.messages {
            try log.process(message, by: name, consumer: consumer)
        }
    }

    @Test func membersSplitPartitionsAndNothingIsLostWhenMembersJoinAndLeave() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 3)
        try cluster.createTopic("group", partitions: 6)
        let producer = try KafkaTestSupport.producer(cluster)
        let groupID = KafkaTestSupport.uniqueGroup()
        let log = ProcessedLog()
        let handler: KafkaRebalanceHandler = { event in
            if case .revoking = event { log.barrier() }
        }
        let a = try KafkaTestSupport.consumer(cluster, group: groupID, rebalanceHandler: handler)
        let b = try KafkaTestSupport.consumer(cluster, group: groupID, rebalanceHandler: handler)
        let c = try KafkaTestSupport.consumer(cluster, group: groupID, rebalanceHandler: handler)
        try a.subscribe(topics: ["group"])
        try b.subscribe(topics: ["group"])

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await Self.runMember("a", a, log: log) }
            group.addTask { try await Self.runMember("b", b, log: log) }
            #expect(
                await eventually(within: 30) {
                    a.assignment.count + b.assignment.count == 6 && !a.assignment.isEmpty && !b.assignment.isEmpty
                })
            #expect(a.assignment.isDisjoint(with: b.assignment))

            // While the group is stable, everything processed is committed.
            try await KafkaTestSupport.produce(producer, topic: "group", range: 0..<300)
            #expect(await eventually(within: 30) { Set(log.all).count >= 300 })
            try await a.commit()
            try await b.commit()

            // Produce while the group changes: a third member joins, then the first leaves.
            try c.subscribe(topics: ["group"])
            group.addTask { try await Self.runMember("c", c, log: log) }
            try await KafkaTestSupport.produce(producer, topic: "group", range: 300..<600)
            #expect(await eventually(within: 40) { !c.assignment.isEmpty })
            #expect(await eventually(within: 30) { Set(log.all).count >= 600 })
            await a.close()
            try await KafkaTestSupport.produce(producer, topic: "group", range: 600..<900)
            #expect(await eventually(within: 40) { b.assignment.count + c.assignment.count == 6 })
            #expect(await eventually(within: 30) { Set(log.all).count >= 900 })
            try await Task.sleep(for: .seconds(1))
            group.cancelAll()
        }
        let processed = log.all
        #expect(Set(processed) == Set((0..<900).map { "value-\($0)" }), "nothing is lost")
        // What was committed before the group changed never comes again. Messages processed during a change
        // can: the mock broker rejects commits while a rebalance is in progress (REBALANCE_IN_PROGRESS), where
        // a real broker (Kafka 2.5 and later) accepts them from the current generation.
        var counts: [String: Int] = [:]
        for value in processed { counts[value, default: 0] += 1 }
        let repeated = counts.filter { $0.value > 1 }.keys
        let committedEarly = Set((0..<300).map { "value-\($0)" })
        #expect(repeated.allSatisfy { !committedEarly.contains($0) }, "repeated: \(repeated.sorted().prefix(10))")
        #expect(log.count(of: "c") > 0)
        await b.close()
        await c.close()
        await producer.close()
    }

    @Test func preRevokeHookRunsBeforePartitionsMoveAndItsOffsetsAreCommitted() async throws {
        // The mock broker refuses a commit once the other member has started the cooperative protocol's second
        // round (REBALANCE_IN_PROGRESS; Kafka 2.5+ accepts it), which happens under CPU load. Such a run shows
        // nothing about the hook, so the scenario runs again on a fresh cluster, up to three times.
        for _ in 0..<3 {
            if try await preRevokeScenario() { return }
        }
        Issue.record("the mock broker refused the pre-revoke commit in three runs out of three")
    }

    /// Returns false when the broker refused the commit, without judging the run.
    func preRevokeScenario() async throws -> Bool {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        try cluster.createTopic("revoke", partitions: 4)
        let producer = try KafkaTestSupport.producer(cluster)
        try await KafkaTestSupport.produce(producer, topic: "revoke", range: 0..<40)
        let groupID = KafkaTestSupport.uniqueGroup()

        // `a` processes everything but stores offsets only inside its pre-revoke hook.
        let processed = Shared<[TopicPartition: Int64]>([:])
        let revoked = Shared<[TopicPartition]>([])
        let aBox = Shared<KafkaConsumer?>(nil)
        let a = try KafkaTestSupport.consumer(cluster, group: groupID) { event in
            guard case .revoking(let partitions) = event, let consumer = aBox.withLock({ $0 }) else { return }
            let offsets = processed.withLock { done in done.filter { partitions.contains($0.key) } }
            try? consumer.storeOffsets(offsets.mapValues { $0 + 1 })
            revoked.withLock { $0.append(contentsOf: partitions) }
        }
        aBox.withLock { $0 = a }
        try a.subscribe(topics: ["revoke"])
        let first = try await KafkaTestSupport.take(40, from: a)
        processed.withLock { done in
            for message in first {
                done[message.topicPartition] = max(done[message.topicPartition] ?? -1, message.offset)
            }
        }

        let bSaw = Shared<[KafkaMessage]>([])
        let b = try KafkaTestSupport.consumer(cluster, group: groupID)
        try b.subscribe(topics: ["revoke"])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for try await message in b.messages { bSaw.withLock { $0.append(message) } }
            }
            group.addTask {
                // `a` keeps serving its group membership while it has no messages to process.
                for try await _ in a.messages {}
            }
            #expect(await eventually(within: 40) { !b.assignment.isEmpty })
            let moved = revoked.withLock { $0 }
            #expect(!moved.isEmpty, "the hook ran before b got partitions")
            #expect(Set(moved) == b.assignment)
            if a.revokeCommitFailures > 0 {
                group.cancelAll()
                return
            }
            let committed = try await a.committedOffsets(for: moved)
            for partition in moved {
                #expect(committed[partition] == .some(processed.withLock { $0[partition]! } + 1))
            }
            // Nothing that `a` processed reaches `b`.
            try await Task.sleep(for: .seconds(2))
            #expect(bSaw.withLock { $0 }.isEmpty)
            try await KafkaTestSupport.produce(producer, topic: "revoke", range: 40..<80)
            group.cancelAll()
        }
        let judged = a.revokeCommitFailures == 0
        await a.close()
        await b.close()
        await producer.close()
        return judged
    }

    @Test func pausedPartitionsDeliverNothingUntilResumed() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        try cluster.createTopic("pause", partitions: 1)
        let producer = try KafkaTestSupport.producer(cluster)
        try await KafkaTestSupport.produce(producer, topic: "pause", range: 0..<10)
        let consumer = try KafkaTestSupport.consumer(cluster, group: KafkaTestSupport.uniqueGroup())
        try consumer.subscribe(topics: ["pause"])
        #expect(try await KafkaTestSupport.take(10, from: consumer).count == 10)

        consumer.pause([TopicPartition("pause", 0)])
        try await Task.sleep(for: .milliseconds(500))
        try await KafkaTestSupport.produce(producer, topic: "pause", range: 10..<20)
        let whilePaused = Shared<Int>(0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { for try await _ in consumer.messages { whilePaused.withLock { $0 += 1 } } }
            try await Task.sleep(for: .seconds(2))
            group.cancelAll()
        }
        #expect(whilePaused.withLock { $0 } == 0)

        consumer.resume([TopicPartition("pause", 0)])
        let resumed = try await KafkaTestSupport.take(10, from: consumer)
        #expect(Set(resumed.map(\.text)) == Set((10..<20).map { "value-\($0)" }))
        await consumer.close()
        await producer.close()
    }

    /// A pause belongs to an assignment. A partition paused (intake held during an outage), moved to another member
    /// and given back later starts unpaused: the application pauses it again if it still holds its intake, and
    /// otherwise it must be fetched — not stay paused for good because nobody resumes a partition it no longer had.
    @Test func aPausedPartitionThatMovesAwayAndComesBackIsFetchedAgain() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        try cluster.createTopic("roam", partitions: 2)
        let groupID = KafkaTestSupport.uniqueGroup()
        let a = try KafkaTestSupport.consumer(cluster, group: groupID)
        let b = try KafkaTestSupport.consumer(cluster, group: groupID)
        let producer = try KafkaTestSupport.producer(cluster)
        let fetched = Shared<[Int32]>([])
        try a.subscribe(topics: ["roam"])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { for try await message in a.messages { fetched.withLock { $0.append(message.partition) } } }
            #expect(await eventually(within: 40) { a.assignment.count == 2 })
            a.pause(Array(a.assignment))

            try b.subscribe(topics: ["roam"])
            group.addTask { for try await _ in b.messages {} }
            #expect(
                await eventually(within: 40) { a.assignment.count == 1 && b.assignment.count == 1 })
            let kept = try #require(a.assignment.first)
            await b.close()
            #expect(await eventually(within: 40) { a.assignment.count == 2 })
            let returned = try #require(a.assignment.subtracting([kept]).first)
            // The pause of a member's first partitions waits until their fetch has started (statistics show it).
            #expect(
                await eventually(within: 20) {
                    a.core.control.withLock { $0.physicallyPaused.contains(kept) && $0.unstarted[kept] == nil }
                })

            try await KafkaTestSupport.produce(producer, topic: "roam", range: 0..<40)
            #expect(
                await eventually(within: 20) { fetched.withLock { $0.contains(returned.partition) } },
                "partition \(returned.partition) came back and was never fetched")
            #expect(!fetched.withLock { $0.contains(kept.partition) }, "the partition still paused delivered nothing")
            group.cancelAll()
        }
        await a.close()
        await producer.close()
    }

    /// Readiness hangs on this: a member the group gives no partition must still learn that it has joined.
    @Test func aMemberLeftWithoutPartitionsStillHearsItsEmptyAssignment() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        try cluster.createTopic("single", partitions: 1)
        let groupID = KafkaTestSupport.uniqueGroup()
        let assignedEvents = Shared<[String: Int]>([:])
        func member(_ name: String) throws -> KafkaConsumer {
            try KafkaTestSupport.consumer(cluster, group: groupID) { event in
                if case .assigned = event { assignedEvents.withLock { $0[name, default: 0] += 1 } }
            }
        }
        let a = try member("a")
        let b = try member("b")
        try a.subscribe(topics: ["single"])
        try b.subscribe(topics: ["single"])
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { for try await _ in a.messages {} }
            group.addTask { for try await _ in b.messages {} }
            #expect(
                await eventually(within: 40) {
                    a.assignment.count + b.assignment.count == 1 && assignedEvents.withLock { $0.count } == 2
                }, "both members heard an assignment: \(assignedEvents.withLock { $0 })")
            group.cancelAll()
        }
        await a.close()
        await b.close()
    }

    @Test func aCleanlyClosedMemberHandsOverWithoutWaitingForItsSession() async throws {
        let cluster = try KafkaTestSupport.endpoint(mockBrokers: 1)
        try cluster.createTopic("handover", partitions: 4)
        let groupID = KafkaTestSupport.uniqueGroup()
        // A 6 s session: a killed member's partitions would come back only after about 11 s on the mock.
        let a = try KafkaTestSupport.consumer(cluster, group: groupID, sessionTimeoutMilliseconds: 6_000)
        let b = try KafkaTestSupport.consumer(cluster, group: groupID, sessionTimeoutMilliseconds: 6_000)
        try a.subscribe(topics: ["handover"])
        try b.subscribe(topics: ["handover"])
        await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { for try await _ in a.messages {} }
            group.addTask { for try await _ in b.messages {} }
            #expect(
                await eventually(within: 40) {
                    a.assignment.count == 2 && b.assignment.count == 2
                })
            let closedAt = ContinuousClock.now
            await a.close()
            #expect(a.assignment.isEmpty)
            #expect(await eventually(within: 20) { b.assignment.count == 4 })
            let handover = ContinuousClock.now - closedAt
            #expect(handover < .seconds(9), "handover took \(handover); a session expiry would take about 11 s")
            group.cancelAll()
        }
        await b.close()
    }

    @Test(.mockClusterOnly("takes two of three brokers down"))
    func consumerAndProducerCarryOnWhenABrokerGoesDownAndComesBack() async throws {
        let cluster = try MockCluster(brokers: 3, logger: KafkaTestSupport.logger)
        try cluster.createTopic("outage", partitions: 3)
        let producer = try KafkaTestSupport.producer(cluster)
        let consumer = try KafkaTestSupport.consumer(cluster, group: KafkaTestSupport.uniqueGroup())
        try consumer.subscribe(topics: ["outage"])
        try await KafkaTestSupport.produce(producer, topic: "outage", range: 0..<30)
        let before = try await KafkaTestSupport.take(30, from: consumer)
        #expect(before.count == 30)
        for message in before { try consumer.storeOffset(for: message) }
        try await consumer.commit()

        try cluster.setBrokerDown(1)
        try cluster.setBrokerDown(2)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await KafkaTestSupport.produce(producer, topic: "outage", range: 30..<90) }
            try await Task.sleep(for: .seconds(2))
            try cluster.setBrokerUp(1)
            try cluster.setBrokerUp(2)
            try await group.waitForAll()
        }
        // Losing the coordinator can cost the group its session, so a message processed during the outage may
        // come again; none may be missing, and nothing committed before the outage comes again.
        let expected = Set((30..<90).map { "value-\($0)" })
        var seen: [String] = []
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await Task.sleep(for: .seconds(40)) }
            for try await message in consumer.messages {
                seen.append(message.text)
                try? consumer.storeOffset(for: message)
                if expected.isSubset(of: Set(seen)) { break }
            }
            group.cancelAll()
        }
        #expect(expected.isSubset(of: Set(seen)), "nothing is lost")
        #expect(Set(seen).isSubset(of: expected), "nothing committed before the outage is redelivered")
        await consumer.close()
        await producer.close()
    }
}

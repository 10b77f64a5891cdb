import Foundation
import Fulfilment
import Gamebase
import GamebaseSimulator
import IAPTestSupport
import Kafka
import Ledger
import Testing

@testable import SystemTestSupport

/// Records a hostile producer can write to `purchase.completed`, sent through the mock cluster to a worker process:
/// each gets one durable outcome, the worker stays up, and the committed offset moves past them.
extension ProcessTests {
    @Suite("Hostile records against iap-worker run", .timeLimit(.minutes(10)), .tags(.librdkafka))
    struct HostileRecords {

        static func record(_ value: [UInt8], key: String = "k", headers: [(String, String)] = [], partition: Int32)
            -> KafkaProducerRecord
        {
            KafkaProducerRecord(
                topic: "purchase.completed", partition: partition, key: Array(key.utf8), value: value,
                headers: headers.map { KafkaHeader(name: $0.0, string: $0.1) })
        }

        @Test func eachHostileRecordGetsOneOutcomeTheWorkerStaysUpAndTheOffsetMovesPast() async throws {
            let cluster = try await Cluster.start(purchases: 4, simulatorArguments: [])
            let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
            let group = "hostile-\(UUID().uuidString.prefix(6))"
            let huge = [UInt8](repeating: UInt8(ascii: "x"), count: 1_000_000)
            let token8k = String(repeating: "t", count: 8_192)
            let message = { (seq: String, user: String, token: String) in
                Array(EndToEndSystem.message(seq, user: user, token: token).utf8)
            }
            // Partition 0: the hostile records, in this order, then the owner's purchase p1 after a stolen and a forged
            // claim of it.
            let hostile: [KafkaProducerRecord] = [
                Self.record(Array("{}".utf8), headers: [("iap-attempts", "9223372036854775807")], partition: 0),
                Self.record(
                    Array("{}".utf8), headers: [("iap-original-timestamp", "9223372036854775807")], partition: 0),
                Self.record(
                    message("p0", "u0", "tok-p0"),
                    headers: [
                        ("iap-original-topic", "forged"), ("iap-original-offset", "-5"),
                        ("iap-reason", "internal_error"),
                    ],
                    partition: 0),
                Self.record(huge, partition: 0),
                Self.record(message("big-token", "u-big", token8k), partition: 0),
                Self.record(message("bigger-token", "u-big", token8k + "t"), partition: 0),
                Self.record(
                    Array(#"{"userId":"u1","userId":"thief","paymentSeq":"p1","purchaseToken":"tok-p1"}"#.utf8),
                    partition: 0),
                Self.record(
                    Array((String(repeating: "[", count: 50_000) + String(repeating: "]", count: 50_000)).utf8),
                    partition: 0),
                Self.record([0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D], partition: 0),
                Self.record(Array("{}".utf8), key: String(repeating: "K", count: 300_000), partition: 0),
                Self.record(message("p1", "thief", "tok-p1"), partition: 0),
                Self.record(message("p1", "u1", "forged-token"), partition: 0),
                Self.record(message("p1", "u1", "tok-p1"), partition: 0),
            ]
            let producer = try KafkaProducer(
                configuration: .init(bootstrapServers: cluster.bootstrap, properties: ["message.max.bytes": "2000000"]),
                logger: EndToEndSystem.logger)
            for record in hostile { try await producer.send(record) }
            // p2: the owner's message is granted first; a stolen and a forged claim come after, on another partition.
            try await producer.send(Self.record(message("p2", "u2", "tok-p2"), partition: 1))

            let worker = try cluster.worker("worker", cluster.workerEnvironment(ledgerURL: ledgerURL, group: group))
            try await cluster.waitFor("p1 and p2 are consumed", within: 90, workers: [worker]) {
                let consumes = try await simulatorConsumes(cluster.simulatorURL)
                return consumes["p1"] == 1 && consumes["p2"] == 1
            }
            try await producer.send(Self.record(message("p2", "thief", "tok-p2"), partition: 2))
            try await producer.send(Self.record(message("p2", "u2", "forged-token"), partition: 2))
            await producer.close()
            try await cluster.waitFor("every record has its outcome", within: 60, workers: [worker]) {
                worker.outcomeCounts.values.reduce(0, +) == hostile.count + 3
            }
            // The committed offsets move past every record.
            try await cluster.waitFor("the offsets are committed past the records", within: 30, workers: [worker]) {
                let committed = try await cluster.committedOffsets(group: group, partitions: [0, 2])
                return committed[0] == Int64(hostile.count) && committed[2] == 2
            }
            #expect(worker.isRunning, "no record stopped the worker")
            #expect(try await worker.terminate() == 0)

            let counts = worker.outcomeCounts
            #expect(counts["malformed"] == 8, "\(counts)")
            #expect(counts["granted"] == 3, "\(counts)")  // p0 (with forged provenance headers), p1, p2
            #expect(counts["rejected"] == 5, "\(counts)")  // the 8 KB token, p1 stolen and forged, p2 stolen and forged

            let failed = try await cluster.readTopic("iap.consume-failed")
            let reasons = Dictionary(grouping: failed.compactMap { $0.json["data"] as? [String: Any] }) {
                $0["reason"] as? String ?? "?"
            }
            #expect(reasons["malformed_message"]?.count == 8)
            #expect(reasons["invalid_purchase"]?.count == 3)  // the 8 KB token, two forged tokens
            #expect(reasons["user_mismatch"]?.count == 2)
            let rejectionIDs = failed.compactMap(\.eventID).filter { $0.hasPrefix("p1:") || $0.hasPrefix("p2:") }
            #expect(
                rejectionIDs.count == 4 && Set(rejectionIDs).count == 4, "each claim under its own id: \(rejectionIDs)")

            let dead = try await cluster.readTopic("purchase.completed.dlq")
            #expect(dead.count == 8, "one dead-letter record per malformed record")
            #expect(dead.allSatisfy { $0.headers.string(named: "iap-reason") == "malformed_message" })
            #expect(dead.contains { $0.value == huge }, "the 1 MB record is dead-lettered whole")
            for record in dead {
                #expect(record.headers.string(named: "iap-original-topic") == "purchase.completed")
                #expect(record.headers.string(named: "iap-attempts") == "1")
            }
            let consumes = try await simulatorConsumes(cluster.simulatorURL)
            #expect(consumes == ["p0": 1, "p1": 1, "p2": 1])
            let grants = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) { ledger in
                try await ["p0", "p1", "p2"].asyncMap { try await ledger.grant(paymentSeq: $0)?.userId }
            }
            #expect(grants == ["u0", "u1", "u2"])
        }
    }
}

extension ProcessTests.Cluster {
    /// Polls `condition` until it holds; fails early when a worker has exited, or after `seconds`.
    func waitFor(_ what: String, within seconds: Double, workers: [ChildProcess], _ condition: () async throws -> Bool)
        async throws
    {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let exited = workers.first(where: { !$0.isRunning }) {
                throw ProcessTestError("\(exited.name) exited while waiting until \(what):\n\(exited.diagnosticOutput)")
            }
            if (try? await condition()) == true { return }
            try await Task.sleep(for: .milliseconds(250))
        }
        let consumed = (try? await simulatorConsumes(simulatorURL).count).map(String.init) ?? "unread"
        throw ProcessTestError(
            "not within \(seconds) s: \(what) (Gamebase consumed \(consumed))\n"
                + workers.map(\.diagnosticOutput).joined(separator: "\n") + "\nKafka (\(kafka.kind)), last lines:\n"
                + kafka.diagnosticOutput.split(separator: "\n").suffix(40).joined(separator: "\n"))
    }

    /// The group's committed offsets of partitions of `purchase.completed`, read by a consumer that never joins.
    func committedOffsets(group: String, partitions: [Int32]) async throws -> [Int32: Int64] {
        let consumer = try KafkaConsumer(
            configuration: .init(bootstrapServers: bootstrap, groupID: group), logger: EndToEndSystem.logger)
        let offsets: [TopicPartition: Int64?]
        do {
            offsets = try await consumer.committedOffsets(
                for: partitions.map { TopicPartition("purchase.completed", $0) })
        } catch {
            await consumer.close()
            throw error
        }
        await consumer.close()
        var result: [Int32: Int64] = [:]
        for (partition, offset) in offsets { if let offset { result[partition.partition] = offset } }
        return result
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}

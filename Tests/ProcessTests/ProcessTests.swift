import Foundation
import Fulfilment
import Gamebase
import GamebaseSimulator
import IAPTestSupport
import Kafka
import KafkaTesting
import Ledger
import Testing

@testable import SystemTestSupport

/// The built executable against Kafka over TCP (`dev-kafka`, librdkafka's mock cluster, or a Tansu broker process when
/// `IAP_TEST_KAFKA_BROKER=tansu`), `gamebase-sim` over HTTP and real databases, with processes killed at random moments.
@Suite("iap-worker as processes", .serialized, .timeLimit(.minutes(10)))
struct ProcessTests {
    typealias Cluster = ProcessCluster

    @Test(.tags(.librdkafka)) func killedAtRandomMomentsUnderTransientFaultsNothingIsLostOrGrantedTwice() async throws {
        let cluster = try await Cluster.start(
            purchases: 400,
            simulatorArguments: [
                "--latency-ms", "15", "--fault-rate", "0.15", "--slow-consume-rate", "0.05", "--slow-consume-delay-ms",
                "2500",
            ])
        let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
        var environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "kill-\(UUID().uuidString.prefix(6))", maxInFlight: 8)
        // This test is about kills, not the dead-letter path: with 15 % faults, four attempts fail together for
        // one verification in 2,000 (about one run in five would dead-letter a purchase, by design); eight make
        // it one in 40 million.
        environment["WORKER_RETRY_MAX_ATTEMPTS"] = "8"
        try await cluster.producePurchases()
        var generator = SystemRandomNumberGenerator()
        var kills = 0
        for round in 0..<6 {
            let worker = try cluster.worker("worker-\(round)", environment)
            // Kill while purchases are in flight: after the worker's first outcome, at a random moment.
            let deadline = Date().addingTimeInterval(30)
            while !worker.output.contains("iap.outcome"), worker.isRunning, Date() < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...800, using: &generator)))
            if worker.isRunning { kills += 1 }
            worker.kill9()
        }
        #expect(kills == 6, "every round killed a running worker")
        let last = try cluster.worker("worker-final", environment)
        // Usually done within a minute. The bound is the designed worst case: a grant whose Consume stayed
        // pending is the sweeper's after its 30 s grace, and a sweeper claim left by a killed worker holds for
        // its 60 s lease — twice, should the first retry fail as well.
        try await cluster.waitUntilAllConsumed(within: 300, workers: [last], ledgerURL: ledgerURL)
        #expect(try await last.terminate() == 0)
        try await cluster.expectInvariants(ledgerURL: ledgerURL)
    }

    @Test(.tags(.librdkafka)) func sigtermDuringLoadExitsZeroAndARestartRepeatsNothing() async throws {
        let cluster = try await Cluster.start(purchases: 300, simulatorArguments: ["--latency-ms", "30"])
        let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
        let environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "term-\(UUID().uuidString.prefix(6))", maxInFlight: 32)
        try await cluster.producePurchases()
        let first = try cluster.worker("worker-first", environment)
        let deadline = Date().addingTimeInterval(60)
        while (try await simulatorConsumes(cluster.simulatorURL).count) < 60 && Date() < deadline && first.isRunning {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(try await first.terminate() == 0, "SIGTERM exits 0")
        #expect(first.output.contains("left the consumer group"))
        let second = try cluster.worker("worker-second", environment)
        try await cluster.waitUntilAllConsumed(within: 120, workers: [second], ledgerURL: ledgerURL)
        #expect(try await second.terminate() == 0)
        // Everything the first run finished was committed on the way out: the second run repeats nothing of it.
        let duplicates = second.output.split(separator: "\n").filter { $0.contains(#""iap.outcome":"duplicate""#) }
            .count
        #expect(duplicates == 0, "\(duplicates) messages were processed again after a graceful shutdown")
        try await cluster.expectInvariants(ledgerURL: ledgerURL)
    }

    @Test(.tags(.librdkafka)) func threeInstancesOnPostgreSQLWithKillsKeepTheInvariants() async throws {
        let cluster = try await Cluster.start(
            purchases: 900, simulatorArguments: ["--latency-ms", "20", "--fault-rate", "0.05"])
        let ledgerURL = try await TestDatabases.freshLedgerURL(.postgres)
        let environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "trio-\(UUID().uuidString.prefix(6))", maxInFlight: 4)
        var workers = try (0..<3).map { try cluster.worker("worker-\($0)", environment) }
        try await Task.sleep(for: .seconds(4))
        try await cluster.producePurchases()
        var generator = SystemRandomNumberGenerator()
        for round in 0..<3 {
            try await Task.sleep(for: .milliseconds(Int.random(in: 500...2_000, using: &generator)))
            // The victim is an instance that is processing (a fresh replacement may still be joining the group).
            let deadline = Date().addingTimeInterval(30)
            var working: [Int] = []
            while working.isEmpty, Date() < deadline {
                working = workers.indices.filter { workers[$0].output.contains("iap.outcome") }
                if working.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
            }
            let victim = try #require(
                working.randomElement(using: &generator), "no instance processed anything within 30 s")
            workers[victim].kill9()
            workers[victim] = try cluster.worker("worker-\(victim)-r\(round)", environment)
        }
        try await cluster.waitUntilAllConsumed(within: 180, workers: workers, ledgerURL: ledgerURL)
        for worker in workers { #expect(try await worker.terminate() == 0) }
        try await cluster.expectInvariants(ledgerURL: ledgerURL)
    }
}

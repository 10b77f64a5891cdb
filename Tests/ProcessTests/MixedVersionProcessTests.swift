import Foundation
import IAPTestSupport
import KafkaTesting
import Ledger
import Testing

@testable import SystemTestSupport

/// A rolling upgrade as operators run it: instances of the previous version (built by `scripts/build-previous.sh`
/// from the last commit before the newest migration) and of this one on one PostgreSQL ledger at the same time,
/// replaced one by one while purchases keep arriving.
@Suite(
    "Instances of two versions on one PostgreSQL ledger", .serialized, .timeLimit(.minutes(10)),
    .tags(.librdkafka, .previousVersion))
struct MixedVersionProcessTests {
    /// The previous version's executable: `IAP_WORKER_PREVIOUS_BIN` (what `scripts/build-previous.sh` prints).
    static func previousExecutable() throws -> String {
        if let path = ProcessInfo.processInfo.environment["IAP_WORKER_PREVIOUS_BIN"] {
            guard !path.isEmpty else {
                throw ProcessTestError(
                    "scripts/build-previous.sh could not build the previous version (its output: .build/previous-build.log, "
                        + "shown after the tests by make test; a shallow clone needs git fetch --unshallow)")
            }
            return path
        }
        throw ProcessTestError(
            "no previous version to run beside this one: IAP_WORKER_PREVIOUS_BIN names it (make test and make tier set "
                + "it; by hand: IAP_WORKER_PREVIOUS_BIN=$(scripts/build-previous.sh) swift test --filter MixedVersion)")
    }

    @Test func aRollingUpgradeUnderLoadKeepsEveryInvariant() async throws {
        let previous = try Self.previousExecutable()
        let cluster = try await ProcessTests.Cluster.start(
            purchases: 1_200, simulatorArguments: ["--latency-ms", "20"])
        let ledgerURL = try await TestDatabases.freshLedgerURL(.postgres)
        let environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "roll-\(UUID().uuidString.prefix(6))", maxInFlight: 8)
        func old(_ name: String) throws -> ChildProcess {
            try ChildProcess(name, ["run"], environment: environment, folder: cluster.folder, executable: previous)
        }

        // The previous version creates the ledger (its schema ends one migration earlier) and takes load.
        // On Tansu, an instance stops only once its group has formed around every member: Tansu keeps a group leader
        // that leaves during a rebalance as the leader for good, and the group never forms again (a broker bug, see
        // docs/compatibility.md, which the mock cluster's coordinator does not have; there the stops land wherever).
        func settled(_ workers: ChildProcess...) async throws {
            if cluster.kafka.kind == .tansu { try await cluster.waitUntilGroupSettled(workers) }
        }
        let old0 = try old("old-0")
        let old1 = try old("old-1")
        _ = try await old0.adminPort()
        _ = try await old1.adminPort()
        try await cluster.produce(range: 0..<400)
        // This version joins: it migrates the ledger while the old instances write, then the old ones are stopped and
        // replaced one at a time, purchases arriving all along.
        let new0 = try cluster.worker("new-0", environment)
        _ = try await new0.adminPort()
        let old1Before = old1.outcomeCounts.values.reduce(0, +)
        try await cluster.produce(range: 400..<800)
        try await settled(old0, old1, new0)
        #expect(try await old0.terminate() == 0)
        let new1 = try cluster.worker("new-1", environment)
        _ = try await new1.adminPort()
        try await cluster.produce(range: 800..<1_200)
        #expect(old1.isRunning, "the previous version runs beside the migrated ledger:\n\(old1.diagnosticOutput)")
        // It kept working on the migrated ledger, beside the new instances.
        let deadline = Date().addingTimeInterval(30)
        while old1.outcomeCounts.values.reduce(0, +) == old1Before, Date() < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(
            old1.outcomeCounts.values.reduce(0, +) > old1Before,
            "the previous version processed nothing after the migration")
        try await settled(old1, new0, new1)
        #expect(try await old1.terminate() == 0)
        try await cluster.waitUntilAllConsumed(within: 180, workers: [new0, new1], ledgerURL: ledgerURL)

        // Rolling back one instance is allowed too: the previous version starts against the migrated ledger.
        let back = try old("old-again")
        _ = try await back.adminPort()
        try await settled(new0, new1, back)
        #expect(try await back.terminate() == 0)
        try await settled(new0, new1)
        for worker in [new0, new1] { #expect(try await worker.terminate() == 0) }
        try await cluster.expectInvariants(ledgerURL: ledgerURL)
        for worker in [old0, old1, back, new0, new1] {
            #expect(
                !worker.output.contains("\"level\":\"error\""),
                "\(worker.name) logged an error:\n\(worker.diagnosticOutput)")
        }
    }
}

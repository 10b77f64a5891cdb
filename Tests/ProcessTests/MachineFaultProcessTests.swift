import Foundation
import IAPTestSupport
import Testing

@testable import SystemTestSupport

/// The machine's own faults against the built `iap-worker`: a file system that fills under the SQLite ledger and then
/// grows, one already below `ledger.min_free_bytes` at start, a PostgreSQL server that turns read-only and back. Each
/// is an outage the worker waits out and says: not ready with the reason, `iap_ledger_writable 0`, nothing
/// dead-lettered or reported failed, every purchase granted and consumed exactly once afterwards, without `reprocess`.
@Suite("The machine's faults against iap-worker", .timeLimit(.minutes(8)))
struct MachineFaultProcessTests {
    typealias Cluster = ProcessCluster

    /// The log's bound through an outage: its two transitions and a few warnings, not a line per purchase attempt
    /// (before, 25,149 error lines in two minutes).
    static let errorLinesAtMost = 10

    /// SQLite on a tmpfs that fills while purchases flow, then grows, with no free-space floor: the writes fail with
    /// SQLITE_FULL, which before this was each purchase's failure (retried, then dead-lettered as internal_error).
    @Test(.enabled(if: ScratchFileSystem.isAvailable, "mounting a tmpfs needs root"))
    func aLedgerDiskThatFillsIsAnOutageAndEveryPurchaseIsGrantedOnceWhenItGrows() async throws {
        let disk = try ScratchFileSystem(megabytes: 24)
        defer { disk.unmount() }
        let cluster = try await Cluster.start(purchases: 1_200, simulatorArguments: ["--latency-ms", "5"])
        let ledgerURL = "sqlite://\(disk.path)/ledger.sqlite"
        var environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "full-\(UUID().uuidString.prefix(6))", maxInFlight: 32)
        environment["LEDGER_MIN_FREE_BYTES"] = "0"
        let worker = try cluster.worker("worker", environment)
        let admin = "http://127.0.0.1:\(try await worker.adminPort())"
        try await cluster.producePurchases()
        try await cluster.waitFor("a sixth is consumed", within: 120, workers: [worker]) {
            try await simulatorConsumes(cluster.simulatorURL).count >= 200
        }
        try await Self.expectAnOutageWaitedOut(
            admin, worker: worker,
            saying: [
                "ledger: disk full (\(disk.path)/ledger.sqlite)", "ledger: I/O error (\(disk.path)/ledger.sqlite)",
            ],
            fault: { try disk.fill() }, repair: { try disk.resize(megabytes: 600) })
        try await cluster.waitUntilAllConsumed(within: 180, workers: [worker], ledgerURL: ledgerURL)
        try await Self.expectAnOutageThatDecidedNothing(cluster, worker, ledgerURL: ledgerURL, admin: admin)
    }

    /// `ledger.min_free_bytes`: a worker started on a disk already below the floor takes nothing in and says why;
    /// space freed, it resumes by itself.
    @Test(.enabled(if: ScratchFileSystem.isAvailable, "mounting a tmpfs needs root"))
    func aWorkerStartedBelowTheFreeSpaceFloorTakesNothingInUntilSpaceReturns() async throws {
        let disk = try ScratchFileSystem(megabytes: 48)
        defer { disk.unmount() }
        try disk.fill(leaving: 12 << 20)
        let cluster = try await Cluster.start(purchases: 300, simulatorArguments: [])
        let ledgerURL = "sqlite://\(disk.path)/ledger.sqlite"
        var environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "floor-\(UUID().uuidString.prefix(6))", maxInFlight: 32)
        environment["LEDGER_MIN_FREE_BYTES"] = String(24 << 20)
        let worker = try cluster.worker("worker", environment)
        let admin = "http://127.0.0.1:\(try await worker.adminPort())"
        try await cluster.producePurchases()
        let notReady = try await Self.waitForReadiness(
            admin, ok: false, within: 30, worker: worker, containing: "ledger")
        #expect(
            notReady.contains("ledger: disk below ledger.min_free_bytes (\(disk.path)/ledger.sqlite)"), "\(notReady)")
        try await Task.sleep(for: .seconds(5))
        #expect(try await simulatorConsumes(cluster.simulatorURL).isEmpty, "nothing is taken in below the floor")
        #expect(try await httpGet("\(admin)/metrics").body.contains("iap_ledger_writable 0"))
        try disk.removeFiller()
        let resumedIn = try await Self.secondsUntilReady(admin, within: 30, worker: worker)
        #expect(resumedIn <= 5, "resumes within 5 s of space returning: \(resumedIn) s")
        try await cluster.waitUntilAllConsumed(within: 120, workers: [worker], ledgerURL: ledgerURL)
        try await Self.expectAnOutageThatDecidedNothing(cluster, worker, ledgerURL: ledgerURL, admin: admin)
    }

    /// An ext4 volume under the SQLite ledger that turns read-only after a disk error (`errors=remount-ro`), then is
    /// repaired and mounted again by the operator: the worker waits, then opens its file again on the new mount
    /// (the descriptors it held stay on the failed one for good) and finishes every purchase once.
    @Test(.enabled(if: ScratchVolume.isAvailable, "a loop-mounted ext4 image needs root and /dev/loop-control"))
    func aLedgerVolumeThatTurnsReadOnlyIsAnOutageAndTheRepairedVolumeIsUsedAgain() async throws {
        let volume = try ScratchVolume(megabytes: 64)
        defer { volume.unmount() }
        let cluster = try await Cluster.start(purchases: 600, simulatorArguments: ["--latency-ms", "5"])
        let ledgerURL = "sqlite://\(volume.path)/ledger.sqlite"
        var environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "readonly-fs-\(UUID().uuidString.prefix(6))", maxInFlight: 32)
        environment["LEDGER_MIN_FREE_BYTES"] = String(4 << 20)  // a 64 MiB volume: below the default floor
        let worker = try cluster.worker("worker", environment)
        let admin = "http://127.0.0.1:\(try await worker.adminPort())"
        try await cluster.producePurchases()
        try await cluster.waitFor("a quarter is consumed", within: 120, workers: [worker]) {
            try await simulatorConsumes(cluster.simulatorURL).count >= 150
        }
        try await Self.expectAnOutageWaitedOut(
            admin, worker: worker,
            saying: [
                "ledger: read-only (\(volume.path)/ledger.sqlite)", "ledger: I/O error (\(volume.path)/ledger.sqlite)",
            ],
            fault: {
                try volume.failAsADiskDoes()
                #expect(volume.isReadOnly)
            }, repair: { try volume.repairAndMountAgain() })
        try await worker.waitForLog("the ledger file was opened again", within: 10)
        try await cluster.waitUntilAllConsumed(within: 180, workers: [worker], ledgerURL: ledgerURL)
        try await Self.expectAnOutageThatDecidedNothing(cluster, worker, ledgerURL: ledgerURL, admin: admin)
    }

    /// A PostgreSQL server that answers but takes no writes (`default_transaction_read_only`, as a standby or an
    /// operator's switch makes it): SQLSTATE 25006 on every write, while reads answer.
    @Test func aPostgreSQLServerTurnedReadOnlyIsAnOutageAndEveryPurchaseIsGrantedOnceWhenItWritesAgain() async throws {
        let database = try PrivatePostgres.start()
        defer { database.stop() }
        let cluster = try await Cluster.start(purchases: 400, simulatorArguments: ["--latency-ms", "20"])
        let ledgerURL = try await database.freshLedgerURL()
        let worker = try cluster.worker(
            "worker",
            cluster.workerEnvironment(
                ledgerURL: ledgerURL, group: "readonly-\(UUID().uuidString.prefix(6))", maxInFlight: 16))
        let admin = "http://127.0.0.1:\(try await worker.adminPort())"
        try await cluster.producePurchases()
        try await cluster.waitFor("a quarter is consumed", within: 120, workers: [worker]) {
            try await simulatorConsumes(cluster.simulatorURL).count >= 100
        }
        try await Self.expectAnOutageWaitedOut(
            admin, worker: worker, saying: ["ledger: read-only (the server takes no writes)"],
            fault: { try database.setReadOnly(true) }, repair: { try database.setReadOnly(false) })
        try await cluster.waitUntilAllConsumed(within: 180, workers: [worker], ledgerURL: ledgerURL)
        try await Self.expectAnOutageThatDecidedNothing(cluster, worker, ledgerURL: ledgerURL, admin: admin)
    }

    /// The worker's standard output on a file system that is full: every log write fails (ENOSPC). The log is lost;
    /// the purchases are not, and the worker neither stalls nor dies.
    @Test(.enabled(if: ScratchFileSystem.isAvailable, "mounting a tmpfs needs root"))
    func aWorkerWhoseLogGoesToAFullDiskFulfilsEveryPurchase() async throws {
        let disk = try ScratchFileSystem(megabytes: 1)
        defer { disk.unmount() }
        let logPath = disk.path + "/worker.log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        try disk.fill()
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        try await Self.expectEveryPurchaseFulfilledWithTheLogAt(log, group: "fulllog")
    }

    /// The worker's standard output a pipe whose reader is gone (a log shipper that died): every log write fails
    /// (EPIPE, SIGPIPE ignored). The worker carries on.
    @Test func aWorkerWhoseLogReaderIsGoneFulfilsEveryPurchase() async throws {
        let pipe = Pipe()
        try pipe.fileHandleForReading.close()
        try await Self.expectEveryPurchaseFulfilledWithTheLogAt(pipe.fileHandleForWriting, group: "closedlog")
    }

    static func expectEveryPurchaseFulfilledWithTheLogAt(_ log: FileHandle, group: String) async throws {
        let cluster = try await Cluster.start(purchases: 400, simulatorArguments: [])
        let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
        let worker = try ChildProcess(
            "worker", ["run"],
            environment: cluster.workerEnvironment(
                ledgerURL: ledgerURL, group: "\(group)-\(UUID().uuidString.prefix(6))", maxInFlight: 32),
            folder: cluster.folder, output: log)
        try log.close()
        try await cluster.producePurchases()
        try await cluster.waitUntilAllConsumed(within: 120, workers: [worker], ledgerURL: ledgerURL)
        try await cluster.expectInvariants(ledgerURL: ledgerURL)
        #expect(try await worker.terminate(within: 30) == 0, "a clean stop, its last lines lost too")
    }

    // MARK: Helpers

    /// After the outage: the money invariants, no dead letter, no consume-failed event (every purchase here is
    /// valid), no outcome counted as dead-lettered, a log of transitions and not of attempts.
    static func expectAnOutageThatDecidedNothing(
        _ cluster: Cluster, _ worker: ChildProcess, ledgerURL: String, admin: String
    ) async throws {
        try await cluster.expectInvariants(ledgerURL: ledgerURL)
        #expect(try await cluster.readTopic("iap.consume-failed").isEmpty, "no valid purchase was reported failed")
        #expect(worker.outcomeCounts["dead_lettered"] == nil, "an outage dead-letters nothing")
        #expect(try await httpGet("\(admin)/metrics").body.contains("iap_ledger_writable 1"))
        let errors = worker.logLines.filter {
            ($0["level"] as? String) == "error" || ($0["level"] as? String) == "critical"
        }
        #expect(
            errors.count <= errorLinesAtMost,
            "\(errors.count) error lines through one outage:\n\(errors.prefix(20).map { "\($0)" }.joined(separator: "\n"))"
        )
        #expect(worker.logLines(containing: "purchase could not be finished").isEmpty, "no purchase counted a retry")
        #expect(try await worker.terminate() == 0)
    }

    /// The fault made, the outage as operators see it — not ready with the condition, `iap_ledger_writable 0`, still
    /// so 5 s on — then the repair, and ready again within 5 s.
    static func expectAnOutageWaitedOut(
        _ admin: String, worker: ChildProcess, saying conditions: [String], fault: () throws -> Void,
        repair: () throws -> Void
    ) async throws {
        try fault()
        let notReady = try await waitForReadiness(admin, ok: false, within: 60, worker: worker)
        #expect(conditions.contains { notReady.contains($0) }, "readiness says why: \(notReady)")
        #expect(try await httpGet("\(admin)/metrics").body.contains("iap_ledger_writable 0"))
        // The outage lasts: purchases wait, none is given up on.
        try await Task.sleep(for: .seconds(5))
        #expect(try await httpGet("\(admin)/readyz").status == 503)
        try repair()
        let resumedIn = try await secondsUntilReady(admin, within: 30, worker: worker)
        #expect(resumedIn <= 5, "resumes within 5 s of the ledger writing again: \(resumedIn) s")
    }

    /// Polls `/readyz` until its status is (or is not) 200 and its body contains `containing`; returns the body.
    static func waitForReadiness(
        _ admin: String, ok: Bool, within seconds: Double, worker: ChildProcess, containing: String = ""
    ) async throws -> String {
        let deadline = Date().addingTimeInterval(seconds)
        var last = ""
        while Date() < deadline {
            guard worker.isRunning else {
                throw ProcessTestError("\(worker.name) exited:\n\(worker.diagnosticOutput)")
            }
            if let answer = try? await httpGet("\(admin)/readyz") {
                last = "\(answer.status) \(answer.body)"
                if (answer.status == 200) == ok, containing.isEmpty || answer.body.contains(containing) {
                    return answer.body
                }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ProcessTestError(
            "/readyz was not \(ok ? "ready" : "not ready") within \(seconds) s (last: \(last))\n\(worker.diagnosticOutput)"
        )
    }

    /// Seconds until `/readyz` answers 200.
    static func secondsUntilReady(_ admin: String, within seconds: Double, worker: ChildProcess) async throws -> Double
    {
        let start = ContinuousClock.now
        _ = try await waitForReadiness(admin, ok: true, within: seconds, worker: worker)
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
}

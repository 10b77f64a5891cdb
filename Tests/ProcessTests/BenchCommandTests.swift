import Foundation
import Fulfilment
import GamebaseHTTP
import IAPTestSupport
import Kafka
import KafkaTesting
import Ledger
import Testing

@testable import SystemTestSupport

/// The benchmark commands measure; these tests only check that they run and report what they promise.
@Suite("iap-dev bench as a process", .timeLimit(.minutes(5)))
struct BenchCommandTests {
    @Test func theGamebaseClientBenchmarkReportsEveryClientForEveryRound() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "iap-bench-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let bench = try ChildProcess(
            "bench", ["bench", "gamebase-client", "--requests", "400", "--concurrency", "4", "--runs", "2", "--json"],
            folder: folder)
        bench.process.waitUntilExit()
        #expect(bench.process.terminationStatus == 0, "\(bench.output)")
        let text = try String(contentsOfFile: bench.stdoutPath, encoding: .utf8)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let runs = try #require(object["runs"] as? [[String: Any]])
        #expect(
            runs.compactMap { $0["client"] as? String }
                == ["gamebase", "async-http-client", "bare", "gamebase", "async-http-client", "bare"])
        for run in runs {
            #expect((run["cpuMicrosecondsPerRequest"] as? Double ?? 0) > 0)
            #expect((run["requestsPerSecond"] as? Double ?? 0) > 0)
        }
        let medians = try #require(object["medianCPUMicrosecondsPerRequest"] as? [String: Double])
        #expect(Set(medians.keys) == ["gamebase", "async-http-client", "bare"])
        // The simulator it started (its payments file lies in an `iap-bench-client-` folder) ended with it.
        #expect(Self.processes(withArgumentContaining: "iap-bench-client-").isEmpty)
    }

    /// `bench floor` measures each part of a purchase's floor in every run, and stops the simulator and the mock
    /// cluster it started.
    @Test func theFloorBenchmarkMeasuresEachPartInEveryRunAndStopsItsHelpers() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "iap-bench-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let bench = try ChildProcess(
            "bench", ["bench", "floor", "--purchases", "300", "--syncs", "20", "--runs", "2", "--json"], folder: folder)
        bench.process.waitUntilExit()
        #expect(bench.process.terminationStatus == 0, "\(bench.output)")
        let text = try String(contentsOfFile: bench.stdoutPath, encoding: .utf8)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        for part in ["httpExchangeRuns", "kafkaRuns", "syncRuns", "syncWallRuns"] {
            let runs = try #require(object[part] as? [Double], "\(part)")
            #expect(runs.count == 2, "\(part)")
            #expect(runs.allSatisfy { $0 > 0 && $0.isFinite }, "\(part): \(runs)")
        }
        #expect(object["purchases"] as? Int == 300)
        // The simulator (its payments file lies in an `iap-bench-floor-` folder) and the mock cluster ended with it.
        #expect(Self.processes(withArgumentContaining: "iap-bench-floor-").isEmpty)
        #expect(Self.processes(withArgumentContaining: "floor-purchases-0:12").isEmpty)
    }

    /// Pointed at a ledger that holds anything, `bench scale` refuses before it migrates, converts or writes: a
    /// ledger in use must never get synthetic grants (the reconciler would then call Gamebase for their users).
    @Test func benchScaleRefusesALedgerItDidNotCreate() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "iap-scale-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = "sqlite://\(folder.path)/live.sqlite"
        let live = Date()
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { store in
            let grant = GrantRecord(
                paymentSeq: "live-1", userId: "player", gamebaseProductId: "gem_pack_100", purchaseToken: "tok",
                productSeq: 1, marketId: "GG", productType: "CONSUMABLE", price: "1.00", currency: "EUR",
                paymentId: "GPA.live-1", isTestPurchase: false, purchaseTime: "2024-05-13T10:20:30+09:00", payload: "",
                grantedAt: live, source: MessageSource(topic: "purchase.completed", partition: 0, offset: 1))
            let event = OutboxEvent(
                id: "live-1:item-granted", paymentSeq: "live-1", topic: "iap.item-granted", key: Array("player".utf8),
                headers: [], payload: Array("{}".utf8), createdAt: live)
            _ = try await store.insertGrant(grant, event: event)
        }
        let size = try FileManager.default.attributesOfItem(atPath: "\(folder.path)/live.sqlite")[.size] as? Int
        let bench = try ChildProcess(
            "bench", ["bench", "scale", "--url", url, "--sizes", "0,100", "--purchases", "0", "--samples", "1"],
            folder: folder)
        bench.process.waitUntilExit()
        #expect(bench.process.terminationStatus != 0)
        #expect(bench.output.contains("fresh, empty database"), "\(bench.output)")
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger, migrate: false) { store in
            let stats = try await store.stats()
            #expect(stats.granted + stats.consumed == 1, "bench scale wrote into the ledger")
            #expect(try await store.reconciliationUsers(activeSince: .distantPast, dueAt: nil, limit: 10) == ["player"])
        }
        #expect(try FileManager.default.attributesOfItem(atPath: "\(folder.path)/live.sqlite")[.size] as? Int == size)
    }

    /// A soak is half an hour of sending: a worker that dies in it fails the run then, with the worker's last lines
    /// and the kept folder, not when the half hour is over (and never as a memory verdict).
    @Test func aSoakWhoseWorkerDiesWhileMessagesAreSentFailsAtOnceNamingIt() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "iap-soak-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // The real worker, killed 60 s after its start: after its warm-up, early in the six minutes of sending.
        let worker = folder.appendingPathComponent("dying-worker").path
        try """
        #!/bin/sh
        '\(ChildProcess.executable)' "$@" &
        child=$!
        sleep 60
        kill -9 $child
        wait $child
        """.write(toFile: worker, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: worker)
        let started = Date()
        let bench = try ChildProcess(
            "soak", ["bench", "soak", "--minutes", "6", "--rate", "20", "--worker", worker], folder: folder)
        let status = try await bench.exitStatus(within: 300)
        #expect(status == 1, "\(bench.output)")
        #expect(bench.output.contains("the worker exited while the messages were sent"), "\(bench.output)")
        #expect(
            Date().timeIntervalSince(started) < 200, "the run failed only after \(Date().timeIntervalSince(started)) s")
        if let range = bench.output.range(of: "the run's logs are kept in ") {
            let kept = bench.output[range.upperBound...].prefix { $0 != ")" && $0 != "\n" }
            #expect(FileManager.default.fileExists(atPath: String(kept)), "kept folder \(kept)")
            try? FileManager.default.removeItem(atPath: String(kept))
        } else {
            Issue.record("no kept folder named: \(bench.output)")
        }
    }

    /// Pids of running processes with an argument containing `text`, from `/proc/PID/cmdline`.
    static func processes(withArgumentContaining text: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry in
            guard let pid = Int32(entry),
                let cmdline = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"),
                String(decoding: cmdline, as: UTF8.self).contains(text)
            else { return nil }
            return pid
        }
    }
}

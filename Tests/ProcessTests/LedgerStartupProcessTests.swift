import Foundation
import IAPTestSupport
import Testing

@testable import SystemTestSupport

/// `iap-worker run` as a process against a PostgreSQL ledger that cannot work (exit non-zero at once, saying why)
/// or cannot be reached yet (keep waiting; SIGTERM still ends it promptly, with exit 0).
@Suite("iap-worker run: ledger start-up", .serialized, .timeLimit(.minutes(2)))
struct LedgerStartupProcessTests {
    static let secretKey = "process-test-secret-key"

    /// The ledger is opened before Kafka or Gamebase is contacted: nothing else needs to exist.
    static func run(ledgerURL: String, environment extra: [String: String] = [:]) throws -> ChildProcess {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "iap-ledger-start-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return try ChildProcess(
            "worker", ["run"],
            environment: [
                "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9", "GAMEBASE_APP_ID": "process-test",
                "GAMEBASE_SECRET_KEY": secretKey,
                "LEDGER_URL": ledgerURL, "SERVER_PORT": "0", "CONSOLE_PORT": "0", "LOG_FORMAT": "json",
                "IAP_WORKER_CONFIG": "",
            ].merging(extra) { $1 },
            folder: folder)
    }

    @Test func aLedgerThatRefusesThePasswordEndsRunAtOnceWithANonZeroStatusAndTheReason() async throws {
        let server = try PostgresTestServer.current()
        let worker = try Self.run(ledgerURL: server.url(database: server.database, password: "wrong-Password-77"))
        let status = try await worker.exitStatus(within: 20)
        #expect(status != 0, "run exited 0: \(worker.diagnosticOutput)")
        let output = worker.output
        #expect(output.contains("ledger refuses this configuration"), "\(worker.diagnosticOutput)")
        #expect(output.contains(#""level":"error""#), "\(worker.diagnosticOutput)")
        #expect(output.contains("LedgerError(configuration)"))
        #expect(output.contains("28P01"))
        #expect(!output.contains("wrong-Password-77"))
        #expect(!output.contains(Self.secretKey))
        #expect(!output.contains("Connection creation failed"))
    }

    @Test func aLedgerWhoseCertificateDoesNotVerifyEndsRunAtOnceWithANonZeroStatus() async throws {
        let server = try PostgresTestServer.current()
        let untrusted = try PostgresTestServer.untrustedCertificateAuthority()
        let worker = try Self.run(
            ledgerURL: server.url(database: server.database, query: "sslmode=verify-full&sslrootcert=\(untrusted)"))
        let status = try await worker.exitStatus(within: 20)
        #expect(status != 0, "run exited 0: \(worker.diagnosticOutput)")
        #expect(worker.output.contains("certificate does not verify"), "\(worker.diagnosticOutput)")
        #expect(!worker.output.contains(server.password.count > 3 ? server.password : "never-matches-\(UUID())"))
    }

    @Test func anUnreachableLedgerIsWaitedForAndSIGTERMEndsTheWaitWithStatusZero() async throws {
        let worker = try Self.run(ledgerURL: "postgres://iap:hunter2@127.0.0.1:9/ledger")
        let deadline = Date().addingTimeInterval(20)
        func warnings() -> Int { worker.output.components(separatedBy: "ledger not reachable yet, retrying").count - 1 }
        while warnings() < 2, worker.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(warnings() >= 2, "\(worker.diagnosticOutput)")
        #expect(worker.isRunning, "run gave up on a ledger that may still come: \(worker.diagnosticOutput)")
        let sent = Date()
        let status = try await worker.terminate(within: 10)
        #expect(Date().timeIntervalSince(sent) < 5, "SIGTERM took \(Date().timeIntervalSince(sent)) s")
        #expect(status == 0, "\(worker.diagnosticOutput)")
        #expect(!worker.output.contains("hunter2"))
    }

    /// glibc's malloc arenas are limited at load, before any thread (RunAtLoad): one per online core, two to four;
    /// an operator's own limit, by either of glibc's two settings, is left alone. The starting line says which.
    @Test func runLimitsMallocArenasToOnePerCoreUnlessTheOperatorSetALimit() async throws {
        let cores = min(4, max(2, sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        let cases: [([String: String], String)] = [
            (["MALLOC_ARENA_MAX": "", "GLIBC_TUNABLES": ""], "\(cores)"),
            (["MALLOC_ARENA_MAX": "8"], "unchanged"),
            (["GLIBC_TUNABLES": "glibc.malloc.arena_max=8"], "unchanged"),
        ]
        for (environment, expected) in cases {
            // An unreachable ledger: the worker logs its start, then waits for the ledger until SIGTERM.
            let worker = try Self.run(ledgerURL: "postgres://iap:hunter2@127.0.0.1:9/ledger", environment: environment)
            let starting = try await worker.waitForLog("starting", within: 20)
            #expect(
                starting["malloc.arena_max"] as? String == expected, "\(environment): \(worker.diagnosticOutput)")
            #expect(try await worker.terminate(within: 10) == 0, "\(worker.diagnosticOutput)")
        }
    }
}

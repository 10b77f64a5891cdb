import AsyncHTTPClient
import Foundation
import Fulfilment
import Gamebase
import GamebaseSimulator
import IAPTestSupport
import Kafka
import KafkaTesting
import Ledger
import NIOCore
import NIOHTTP1
import Testing

@testable import SystemTestSupport

#if canImport(Glibc)
    import Glibc
#endif

extension ProcessTests {
    /// Faults that last — a poison purchase, a wrong key that gets fixed, a dead-letter topic that keeps failing, a
    /// shutdown at any moment, a database that goes away — against the built executable.
    @Suite("Lasting faults against iap-worker", .timeLimit(.minutes(10)))
    struct LastingFaults {
        @Test func onePoisonPurchaseIsDeadLetteredWhileTheOthersAreGrantedAndTheCircuitStaysClosed() async throws {
            // Gamebase answers 9999 for p0's token on every call; the three other purchases are fine.
            let cluster = try await Cluster.start(
                purchases: 4, simulatorArguments: ["--token-result-code", "tok-p0=9999"])
            let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
            let worker = try cluster.worker(
                "worker",
                cluster.workerEnvironment(ledgerURL: ledgerURL, group: "poison-\(UUID().uuidString.prefix(6))"))
            try await cluster.producePurchases()
            try await cluster.waitFor(
                "the others are consumed and the poison purchase is dead-lettered", within: 60, workers: [worker]
            ) {
                let consumes = try await simulatorConsumes(cluster.simulatorURL)
                return consumes.count == 3 && worker.outcomeCounts["dead_lettered"] == 1
            }
            #expect(worker.logLines(containing: "circuit open").isEmpty, "one failing purchase never opens the circuit")
            let port = try await worker.adminPort()
            #expect(try await httpGet("http://127.0.0.1:\(port)/readyz").status == 200)
            #expect(try await worker.terminate() == 0)
            let dead = try await cluster.readTopic("purchase.completed.dlq")
            #expect(dead.count == 1)
            #expect(dead.first?.headers.string(named: "iap-reason") == "gamebase_unavailable")
            #expect(dead.first?.json["paymentSeq"] as? String == "p0")
            #expect(try await simulatorConsumes(cluster.simulatorURL)["p0"] == nil)
        }

        @Test func aWorkerStartedWithAWrongKeyResumesWhenTheSecretFileIsFixed() async throws {
            let cluster = try await Cluster.start(purchases: 10, simulatorArguments: [])
            let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
            let keyFile = cluster.folder.appendingPathComponent("secret-key")
            try "not-the-key\n".write(to: keyFile, atomically: true, encoding: .utf8)
            var environment = cluster.workerEnvironment(
                ledgerURL: ledgerURL, group: "key-\(UUID().uuidString.prefix(6))")
            environment["GAMEBASE_SECRET_KEY"] = nil
            environment["GAMEBASE_SECRET_KEY_FILE"] = keyFile.path
            try await cluster.producePurchases()
            let worker = try cluster.worker("worker", environment)
            try await worker.waitForLog("rejects the worker's configuration")
            let port = try await worker.adminPort()
            #expect(try await httpGet("http://127.0.0.1:\(port)/readyz").status == 503)
            #expect(
                try await httpGet("http://127.0.0.1:\(port)/healthz").status == 200,
                "alive: nothing restarts it for this")
            #expect(try await httpGet("http://127.0.0.1:\(port)/metrics").body.contains("iap_stopped 1"))
            #expect(try await simulatorConsumes(cluster.simulatorURL).isEmpty)
            // The mounted secret is fixed in place (as a Kubernetes secret update does).
            let fixed = Date()
            try "\(EndToEndSystem.secretKey)\n".write(to: keyFile, atomically: true, encoding: .utf8)
            try await worker.waitForLog("accepts the worker's configuration again", within: 10)
            let resumedAfter = Date().timeIntervalSince(fixed)
            #expect(resumedAfter < 5, "resumed \(resumedAfter) s after the key was fixed")
            try await cluster.waitFor("every purchase is consumed", within: 60, workers: [worker]) {
                try await simulatorConsumes(cluster.simulatorURL).count == 10
            }
            #expect(try await httpGet("http://127.0.0.1:\(port)/readyz").status == 200)
            #expect(
                worker.logLines(containing: "rejects the worker's configuration").count == 1,
                "one log line per state change")
            #expect(try await worker.terminate() == 0)
            try await cluster.expectInvariants(ledgerURL: ledgerURL)
        }

        @Test(.tags(.librdkafka)) func reprocessOnADeadLetterTopicThatFailsAgainEndsWithEveryRecordHandledOnce()
            async throws
        {
            // p0…p4 now succeed; p5 and p6 still poison Gamebase (9999); one record is malformed.
            let cluster = try await Cluster.start(
                purchases: 7,
                simulatorArguments: ["--token-result-code", "tok-p5=9999", "--token-result-code", "tok-p6=9999"])
            let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
            let group = "redrive-\(UUID().uuidString.prefix(6))"
            let producer = try KafkaProducer(
                configuration: .init(bootstrapServers: cluster.bootstrap), logger: EndToEndSystem.logger)
            var values = (0..<7).map { Array(EndToEndSystem.message("p\($0)", user: "u\($0)").utf8) }
            values.append(Array("not json".utf8))
            for (index, value) in values.enumerated() {
                let reason = index == 7 ? "malformed_message" : "gamebase_unavailable"
                try await producer.send(
                    KafkaProducerRecord(
                        topic: "purchase.completed.dlq", key: Array("k\(index)".utf8), value: value,
                        headers: [
                            ("iap-original-topic", "purchase.completed"), ("iap-original-partition", "0"),
                            ("iap-original-offset", "\(index)"), ("iap-reason", reason), ("iap-attempts", "4"),
                        ].map { KafkaHeader(name: $0.0, string: $0.1) }))
            }
            await producer.close()
            var environment = cluster.workerEnvironment(ledgerURL: ledgerURL, group: group)
            environment["WORKER_RETRY_MAX_ATTEMPTS"] = "2"
            let first = try ChildProcess("reprocess-1", ["reprocess"], environment: environment, folder: cluster.folder)
            let status = try await first.exitStatus(within: 120)
            #expect(status == 0, "\(first.output)")
            #expect(first.output.contains("8 record(s) of purchase.completed.dlq handled"), "\(first.output)")
            #expect(first.output.contains("dead_lettered_again"), "\(first.output)")
            let consumes = try await simulatorConsumes(cluster.simulatorURL)
            #expect(Set(consumes.keys) == Set((0..<5).map { "p\($0)" }))
            var dead = try await cluster.readTopic("purchase.completed.dlq")
            #expect(dead.count == 8 + 3, "the two poison purchases and the malformed record went back, once each")
            let again = dead.suffix(3)
            #expect(
                again.allSatisfy {
                    $0.headers.string(named: "iap-attempts") == "5" || $0.headers.string(named: "iap-attempts") == "6"
                })
            #expect(again.allSatisfy { $0.headers.string(named: "iap-original-topic") == "purchase.completed" })

            // A second run handles exactly what the first one sent back, and ends again.
            let second = try ChildProcess(
                "reprocess-2", ["reprocess"], environment: environment, folder: cluster.folder)
            #expect(try await second.exitStatus(within: 120) == 0, "\(second.output)")
            #expect(second.output.contains("3 record(s) of purchase.completed.dlq handled"), "\(second.output)")
            dead = try await cluster.readTopic("purchase.completed.dlq")
            #expect(dead.count == 11 + 3)
            let failed = try await cluster.readTopic("iap.consume-failed")
            #expect(
                failed.filter { $0.reason == "malformed_message" }.isEmpty,
                "a record still malformed is not announced again")
            #expect(try await simulatorConsumes(cluster.simulatorURL).values.allSatisfy { $0 == 1 })
        }

        /// Records written in one batch: a broker whose ListOffsets answer is the last batch's first offset + 1
        /// (Tansu) must not make the run stop after the batch's first record, nor take a partition for done.
        @Test(.tags(.librdkafka)) func reprocessHandlesEveryRecordOfADeadLetterTopicWrittenInOneBatch() async throws {
            let cluster = try await Cluster.start(purchases: 6, simulatorArguments: [])
            let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
            try await KafkaProducer.sendInOneBatch(
                (0..<6).map { index in
                    KafkaProducerRecord(
                        topic: "purchase.completed.dlq", partition: 0, key: Array("k\(index)".utf8),
                        value: Array(EndToEndSystem.message("p\(index)", user: "u\(index)").utf8),
                        headers: [
                            ("iap-original-topic", "purchase.completed"), ("iap-original-partition", "0"),
                            ("iap-original-offset", "\(index)"), ("iap-reason", "gamebase_unavailable"),
                        ].map { KafkaHeader(name: $0.0, string: $0.1) })
                }, bootstrapServers: cluster.bootstrap, logger: EndToEndSystem.logger)
            let environment = cluster.workerEnvironment(
                ledgerURL: ledgerURL, group: "batch-\(UUID().uuidString.prefix(6))")
            let run = try ChildProcess("reprocess", ["reprocess"], environment: environment, folder: cluster.folder)
            #expect(try await run.exitStatus(within: 120) == 0, "\(run.output)")
            #expect(run.output.contains("6 record(s) of purchase.completed.dlq handled"), "\(run.output)")
            #expect(Set(try await simulatorConsumes(cluster.simulatorURL).keys) == Set((0..<6).map { "p\($0)" }))
        }

        @Test(.tags(.librdkafka)) func sigtermDuringSlowVerifiesDeadLettersNothing() async throws {
            let cluster = try await Cluster.start(purchases: 40, simulatorArguments: ["--latency-ms", "10"])
            let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
            var environment = cluster.workerEnvironment(
                ledgerURL: ledgerURL, group: "slow-\(UUID().uuidString.prefix(6))")
            environment["GAMEBASE_TIMEOUT_MS"] = "30000"
            environment["WORKER_SHUTDOWN_TIMEOUT_MS"] = "300"
            let worker = try cluster.worker("worker", environment)
            // Gamebase is healthy at first: fifteen purchases go through…
            try await cluster.produce(range: 0..<15)
            try await cluster.waitFor("the first purchases are consumed", within: 60, workers: [worker]) {
                try await simulatorConsumes(cluster.simulatorURL).count == 15
            }
            // …then it answers slowly, and SIGTERM comes while the next verifies wait for their answers: the drain
            // deadline cuts them short, which is no failure of Gamebase or of the purchases.
            try await setSimulatorFaults(cluster.simulatorURL, #"{"latencyMs":20000,"unknownFieldRate":0}"#)
            let callsBefore = try await simulatorCalls(cluster.simulatorURL)["payment_transaction", default: 0]
            try await cluster.produce(range: 15..<40)
            try await cluster.waitFor("verifies are under way", within: 60, workers: [worker]) {
                try await simulatorCalls(cluster.simulatorURL)["payment_transaction", default: 0] > callsBefore
            }
            try await cluster.expectAShutdownThatDecidesNothing(worker)
            try await setSimulatorFaults(cluster.simulatorURL, #"{"latencyMs":10,"unknownFieldRate":0}"#)
            try await cluster.expectARestartFinishesEverythingOnce(environment, ledgerURL: ledgerURL)
        }

        /// The same with the worker's first verifies (a cold connection pool) the ones cut short.
        @Test(.tags(.librdkafka)) func sigtermWhileTheFirstVerifiesWaitDeadLettersNothing() async throws {
            let cluster = try await Cluster.start(purchases: 20, simulatorArguments: ["--latency-ms", "3000"])
            let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
            var environment = cluster.workerEnvironment(
                ledgerURL: ledgerURL, group: "cold-\(UUID().uuidString.prefix(6))")
            environment["GAMEBASE_TIMEOUT_MS"] = "10000"
            environment["WORKER_SHUTDOWN_TIMEOUT_MS"] = "300"
            try await cluster.producePurchases()
            let worker = try cluster.worker("worker", environment)
            try await cluster.waitFor("verifies are under way", within: 60, workers: [worker]) {
                try await simulatorCalls(cluster.simulatorURL)["payment_transaction", default: 0] > 0
            }
            try await cluster.expectAShutdownThatDecidesNothing(worker)
            try await cluster.expectARestartFinishesEverythingOnce(environment, ledgerURL: ledgerURL)
        }

        @Test(.tags(.librdkafka)) func sigtermAtAnyMomentOfStartUpExitsZero() async throws {
            let cluster = try await Cluster.start(purchases: 1, simulatorArguments: [])
            let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
            let environment = cluster.workerEnvironment(
                ledgerURL: ledgerURL, group: "early-\(UUID().uuidString.prefix(6))")
            // Twenty starts stopped 0 … 3.8 s after the worker catches SIGTERM: at once (the stop is remembered until
            // the worker's signal sequence takes it), then before, during and just after the group's first assignment
            // (the mock broker takes about 3 s), where librdkafka 2.0.2 aborted (#4312). The clock starts when the
            // process catches the signal, which `run` does right after the dynamic loader (RunAtLoad): before
            // that no code of any process can take charge of a signal, and on a loaded machine the loader alone takes
            // 0.1 s.
            // Tagged `.librdkafka`: stopping a consumer inside its first join takes another path by version (before 2.3
            // its handle is kept, from 2.3 on it is destroyed: KafkaConsumer, librdkafka #4312), so this runs on both.
            for run in 0..<20 {
                let worker = try cluster.worker("worker-\(run)", environment)
                try await worker.waitUntilCatchingSIGTERM()
                try await Task.sleep(for: .milliseconds(run * 200))
                let status = try await worker.terminate(within: 45)
                #expect(
                    status == 0 && !worker.endedBySignal,
                    """
                    run \(run), stopped \(run * 200) ms after it caught SIGTERM: \
                    \(worker.endedBySignal ? "killed by signal" : "exit") \(status)\n\(worker.diagnosticOutput)
                    """)
            }
        }

        @Test func postgreSQLStoppedForThirtySecondsLeavesNothingHungLostOrGrantedTwice() async throws {
            let database = try PrivatePostgres.start()
            defer { database.stop() }
            let cluster = try await Cluster.start(purchases: 300, simulatorArguments: ["--latency-ms", "20"])
            let ledgerURL = try await database.freshLedgerURL()
            let worker = try cluster.worker(
                "worker",
                cluster.workerEnvironment(
                    ledgerURL: ledgerURL, group: "pgdown-\(UUID().uuidString.prefix(6))", maxInFlight: 16))
            try await cluster.producePurchases()
            try await cluster.waitFor("a third is consumed", within: 120, workers: [worker]) {
                try await simulatorConsumes(cluster.simulatorURL).count >= 100
            }
            try database.crash()
            try await Task.sleep(for: .seconds(30))
            try database.resume()
            try await cluster.waitUntilAllConsumed(within: 180, workers: [worker], ledgerURL: ledgerURL)
            #expect(
                worker.logLines(containing: "the ledger does not answer").count == 1, "one log line per state change")
            #expect(worker.logLines(containing: "the ledger answers again").count == 1)
            #expect(worker.outcomeCounts["dead_lettered"] == nil, "an outage dead-letters nothing")
            #expect(try await worker.terminate() == 0)
            try await cluster.expectInvariants(ledgerURL: ledgerURL)
        }
    }
}

extension ProcessTests.Cluster {
    /// SIGTERM while purchases are cut short: exit 0, and nothing dead-lettered or published as failed.
    func expectAShutdownThatDecidesNothing(_ worker: ChildProcess) async throws {
        #expect(try await worker.terminate() == 0)
        #expect(try await readTopic("purchase.completed.dlq").isEmpty, "work cut short by shutdown is not a failure")
        #expect(try await readTopic("iap.consume-failed").isEmpty)
        #expect(worker.outcomeCounts["dead_lettered"] == nil)
    }

    /// A second worker, given time to drain, finishes every purchase, once.
    func expectARestartFinishesEverythingOnce(_ environment: [String: String], ledgerURL: String) async throws {
        var environment = environment
        environment["WORKER_SHUTDOWN_TIMEOUT_MS"] = "30000"
        let second = try worker("worker-2", environment)
        try await waitUntilAllConsumed(within: 120, workers: [second], ledgerURL: ledgerURL)
        #expect(try await second.terminate() == 0)
        try await expectInvariants(ledgerURL: ledgerURL)
    }
}

/// `POST /admin/faults` of a simulator process.
func setSimulatorFaults(_ baseURL: String, _ json: String) async throws {
    var request = HTTPClientRequest(url: "\(baseURL)/admin/faults")
    request.method = .POST
    request.body = .bytes(ByteBuffer(string: json))
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(5))
    guard response.status == .ok else { throw ProcessTestError("POST /admin/faults answered \(response.status)") }
}

/// `GET /admin/counters` of a simulator process: calls per API.
func simulatorCalls(_ baseURL: String) async throws -> [String: Int] {
    let (_, body) = try await httpGet("\(baseURL)/admin/counters")
    let object = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
    return (object?["calls"] as? [String: Int]) ?? [:]
}

/// A PostgreSQL server of the test's own (the shared one must stay up for the other suites), which it may crash
/// and start again: `scripts/test-postgres.sh` on another port and folder.
struct PrivatePostgres {
    let port: Int
    let folder: String
    let baseURL: String

    static var script: String {
        TestRepository.root
            .appendingPathComponent("scripts/test-postgres.sh").path
    }

    /// Starts one on a port below Linux's ephemeral range (32768–60999): a port in it may be the local end of one of
    /// the many client connections a loaded run holds, where the server was seen to start and then refuse every
    /// connection. A start that fails is tried on another port, three times in all.
    static func start() throws -> PrivatePostgres {
        var failure: (any Error)?
        for _ in 0..<3 {
            let port = Int.random(in: 20_000..<30_000)
            let folder = "/tmp/iap-private-pg-\(port)"
            do {
                let url = try run(["start"], port: port, folder: folder).trimmingCharacters(in: .whitespacesAndNewlines)
                return PrivatePostgres(port: port, folder: folder, baseURL: url)
            } catch {
                failure = error
                _ = try? run(["stop"], port: port, folder: folder)
                try? FileManager.default.removeItem(atPath: folder)
            }
        }
        throw failure ?? ProcessTestError("no private PostgreSQL server started")
    }

    func freshLedgerURL() async throws -> String {
        try await TestDatabases.freshPostgresLedgerURL(base: baseURL)
    }

    func crash() throws { _ = try Self.run(["crash"], port: port, folder: folder) }
    /// `default_transaction_read_only` for every session, the worker's open ones too: writes fail with 25006.
    func setReadOnly(_ on: Bool) throws {
        _ = try Self.run(["read-only", on ? "on" : "off"], port: port, folder: folder)
    }
    func resume() throws { _ = try Self.run(["resume"], port: port, folder: folder) }
    func stop() {
        _ = try? Self.run(["stop"], port: port, folder: folder)
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Runs the script with posix_spawn and a blocking waitpid: the server it starts inherits descriptors and
    /// lives on, which Foundation's `Process` does not tell from its own child still running.
    @discardableResult
    static func run(_ arguments: [String], port: Int, folder: String) throws -> String {
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("pg-\(UUID().uuidString).out")
            .path
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        var environment = ProcessInfo.processInfo.environment
        environment["IAP_TEST_POSTGRES_PORT"] = String(port)
        environment["IAP_TEST_POSTGRES_DIR"] = folder
        let argv = ["/bin/bash", script] + arguments
        let envp = environment.map { "\($0.key)=\($0.value)" }
        var cArgv = argv.map { strdup($0) } + [nil]
        var cEnvp = envp.map { strdup($0) } + [nil]
        defer {
            for pointer in cArgv { free(pointer) }
            for pointer in cEnvp { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/bash", &actions, nil, &cArgv, &cEnvp)
        guard spawned == 0 else { throw ProcessTestError("posix_spawn failed: \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let exitCode = (status >> 8) & 0xff
        guard status & 0x7f == 0, exitCode == 0 else {
            throw ProcessTestError("test-postgres.sh \(arguments.joined(separator: " ")) ended with status \(status)")
        }
        return (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    }
}

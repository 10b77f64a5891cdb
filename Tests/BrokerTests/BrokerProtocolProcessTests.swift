import Foundation
import IAPTestSupport
import Kafka
import KafkaTesting
import Testing

@testable import SystemTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// `iap-worker run` and `check-config` against a real broker (Tansu) with the librdkafka this test process loaded:
/// before 2.2.0 (Debian 12's 2.0.2) the client cannot read the broker's handshake answer and the worker must say so in
/// one line, its `/readyz` and `check-config`; from 2.2.0 on it joins its group. `make test` runs it on both.
@Suite("A worker and a broker it cannot speak to", .serialized, .timeLimit(.minutes(5)), .tags(.librdkafka))
struct BrokerProtocolProcessTests {
    @Test(
        .enabled(
            if: Librdkafka.misreadsTaggedFields,
            "needs a librdkafka before 2.2.0 (Debian 12's 2.0.2): later ones speak to Tansu, the next test's case"))
    func aClientThatCannotReadTheHandshakeSaysWhyOnceAMinuteInTheLogReadyzAndCheckConfig() async throws {
        let cluster = try await ProcessCluster.start(purchases: 1, simulatorArguments: [], kafka: .tansu)
        let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
        var environment = cluster.workerEnvironment(ledgerURL: ledgerURL, group: "protocol")
        // librdkafka's own lines come at debug level once recognised: this shows how often it repeated them.
        environment["LOG_LEVEL"] = "debug"
        let worker = try cluster.worker("worker", environment)
        let port = try await worker.adminPort()
        let started = Date()

        let reason =
            "cannot speak to Kafka broker \(cluster.bootstrap)/bootstrap with librdkafka \(Librdkafka.versionString)"
        var readiness = (status: 0, body: "")
        while Date().timeIntervalSince(started) < 30 {
            readiness = try await httpGet("http://127.0.0.1:\(port)/readyz")
            if readiness.body.contains(reason) { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(readiness.status == 503)
        #expect(readiness.body.contains(reason) && readiness.body.contains("2.8 or later"), "\(readiness.body)")

        // Some 25 s of reconnects (librdkafka backs off up to 10 s): one error line, librdkafka's own as debug.
        try await Task.sleep(for: .seconds(max(0, 25 - Date().timeIntervalSince(started))))
        let errors = worker.logLines.filter { ($0["level"] as? String) == "error" }
        let ours = worker.logLines(containing: reason)
        #expect(ours.count == 1, "one line in 25 s:\n\(worker.diagnosticOutput)")
        #expect(ours.first?["level"] as? String == "error")
        #expect(ours.first?["librdkafka.version"] as? String == Librdkafka.versionString)
        #expect(errors.count == 1, "\(errors)")
        let repeated = worker.logLines(containing: "ApiVersionRequest failed").filter {
            ($0["msg"] as? String)?.contains("cannot speak") == false
        }
        #expect(repeated.count >= 3, "librdkafka met it again and again (\(repeated.count) times)")
        #expect(repeated.allSatisfy { ($0["level"] as? String) == "debug" }, "none of librdkafka's own above debug")
        #expect(
            !worker.logLines.contains {
                ($0["level"] as? String) == "warning" && ($0["kafka.code"] as? String) == "_ALL_BROKERS_DOWN"
            }, "its consequence, all brokers down, is no warning of its own")

        // check-config: the same reason, and a failing status.
        environment["LOG_LEVEL"] = "info"
        let check = try ChildProcess("check-config", ["check-config"], environment: environment, folder: cluster.folder)
        #expect(try await check.exitStatus(within: 60) != 0)
        #expect(check.output.contains("kafka     FAILED: \(reason)"), "\(check.output)")

        #expect(try await worker.terminate() == 0, "SIGTERM still ends it cleanly")
    }

    @Test(
        .enabled(
            if: !Librdkafka.misreadsTaggedFields,
            "needs librdkafka 2.2.0 or later: earlier ones cannot speak to Tansu, the test above's case"))
    func aCurrentClientJoinsItsGroupOnTheSameBroker() async throws {
        let cluster = try await ProcessCluster.start(purchases: 1, simulatorArguments: [], kafka: .tansu)
        let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
        let environment = cluster.workerEnvironment(ledgerURL: ledgerURL, group: "protocol")
        let worker = try cluster.worker("worker", environment)
        let port = try await worker.adminPort()
        var readiness = (status: 0, body: "")
        let started = Date()
        while Date().timeIntervalSince(started) < 60, readiness.status != 200 {
            readiness = try await httpGet("http://127.0.0.1:\(port)/readyz")
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(readiness.status == 200, "\(readiness.body)\n\(worker.diagnosticOutput)")
        #expect(worker.logLines(containing: "cannot speak to Kafka broker").isEmpty)
        let check = try ChildProcess("check-config", ["check-config"], environment: environment, folder: cluster.folder)
        #expect(try await check.exitStatus(within: 60) == 0, "\(check.output)")
        #expect(check.output.contains("kafka     ok: 1 broker(s)"), "\(check.output)")
        #expect(try await worker.terminate() == 0)
    }
}

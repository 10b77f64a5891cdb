import Foundation
import IAPTestSupport
import Kafka
import KafkaTesting
import Testing

@testable import SystemTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// `iap-worker events tail` as a process, next to `iap-worker run`, dev-kafka and gamebase-sim: it prints exactly the
/// events there are, one line each, filtered as asked, never a token or a secret, and exits 0 on SIGINT and SIGTERM.
extension ProcessTests {
    @Suite("iap-worker events tail against a running worker", .timeLimit(.minutes(10)), .tags(.librdkafka))
    struct EventsTail {
        static let malformed =
            #"{"userId":"u-bad","paymentSeq":"p-bad","purchaseToken":"tok-SECRET-malformed","storeCode":5}"#
        /// Written straight to the item-granted topic: a userId that would start a forged line and clear the screen.
        static let hostileGranted =
            #"{"data":{"userId":"evil\n1970-01-01T00:00:00.000Z item-granted   paymentSeq=FORGED\u001b[2J","paymentSeq":"p-hostile","gamebaseProductId":"x"}}"#

        @Test func tailPrintsExactlyTheEventsProducedFilteredNeverATokenAndExitsZeroOnSignals() async throws {
            let cluster = try await Cluster.start(purchases: 2, simulatorArguments: [])
            let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
            let environment = cluster.workerEnvironment(
                ledgerURL: ledgerURL, group: "tail-\(UUID().uuidString.prefix(6))")

            // From the end (the default): started first, it shows what comes after its "following" notes.
            let tail = try ChildProcess(
                "events-tail", ["events", "tail"], environment: environment, folder: cluster.folder)
            for topic in ["iap.item-granted", "iap.consume-failed", "purchase.completed.dlq"] {
                try await tail.waitForText("following \(topic) (1 partition(s)) from the end")
            }
            let worker = try cluster.worker("worker", environment)
            let producer = try KafkaProducer(
                configuration: .init(bootstrapServers: cluster.bootstrap, properties: ["message.max.bytes": "2000000"]),
                logger: EndToEndSystem.logger)
            let purchase = { (value: String, partition: Int32) in
                KafkaProducerRecord(
                    topic: "purchase.completed", partition: partition, key: Array("k".utf8), value: Array(value.utf8))
            }
            try await producer.send(purchase(Self.malformed, 0))
            try await producer.send(purchase(EndToEndSystem.message("p0", user: "u0"), 1))
            try await producer.send(
                purchase(EndToEndSystem.message("p1", user: "u1", token: "forged-tok-SECRET-p1"), 2))
            // Hostile records on the worker's own topics: anyone with write access could send them.
            try await producer.send(
                KafkaProducerRecord(topic: "iap.item-granted", value: Array(Self.hostileGranted.utf8)))
            try await producer.send(
                KafkaProducerRecord(topic: "iap.consume-failed", value: [0x6E, 0x6F, 0xFF, 0xFE, 0x0A]))
            let huge =
                Array(#"{"purchaseToken":"tok-SECRET-huge","pad":""#.utf8) + [UInt8](repeating: 0x61, count: 1_000_000)
                + Array(#""}"#.utf8)
            try await producer.send(
                KafkaProducerRecord(
                    topic: "purchase.completed.dlq", value: huge,
                    headers: [
                        KafkaHeader(name: "iap-reason", string: "malformed_message"),
                        KafkaHeader(name: "iap-error", string: "tok-SECRET-header"),
                    ]))
            await producer.close()

            try await cluster.waitFor("the tail printed 7 events", within: 90, workers: [worker, tail]) {
                tail.lines.count >= 7
            }
            // Nothing more comes: one line per event, no extra.
            try await Task.sleep(for: .seconds(2))
            let lines = tail.lines
            #expect(lines.count == 7, "\(lines.joined(separator: "\n"))")
            let expected = [
                "item-granted   paymentSeq=p0 userId=u0 product=gems_500 source=message",
                "consume-failed paymentSeq=p1 userId=u1 reason=invalid_purchase",
                "consume-failed paymentSeq=p-bad userId=u-bad reason=malformed_message",
                "dead-letter    paymentSeq=p-bad userId=u-bad reason=malformed_message source=purchase.completed[0]@0",
                #"item-granted   paymentSeq=p-hostile userId=evil\u{A}1970-01-01T00:00:00.000Z\u{20}item-granted"#,
                "consume-failed paymentSeq=- userId=- reason=-",
                "dead-letter    paymentSeq=- userId=- reason=malformed_message source=-",
            ]
            for text in expected {
                #expect(
                    lines.filter { $0.contains(text) }.count == 1,
                    "one line with \(text) in:\n\(lines.joined(separator: "\n"))")
            }
            for line in lines {
                #expect(
                    line.wholeMatch(
                        of:
                            /20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (item-granted  |consume-failed|dead-letter   ) \S.*/
                    ) != nil, "\(line)")
                #expect(!line.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(line)")
            }
            #expect(
                !tail.output.contains("SECRET") && !tail.output.contains("tok-")
                    && !tail.output.contains(EndToEndSystem.secretKey))
            #expect(try await tail.sendSignal(SIGINT, within: 30) == 0, "SIGINT exits 0")

            // Filters, JSON and --since, each from the beginning (or the last 10 minutes) of the same topics.
            let runs: [(arguments: [String], count: Int, signal: Int32)] = [
                (["--from-beginning", "--json"], 7, SIGTERM),
                (["--from-beginning", "--user", "u0"], 1, SIGINT),
                (["--from-beginning", "--payment-seq", "p-bad"], 2, SIGTERM),
                (["--from-beginning", "--reason", "malformed_message"], 3, SIGTERM),
                (["--from-beginning", "--type", "consume-failed,dead-letter"], 5, SIGTERM),
                // A real broker looks offsets up by time: --since 10m shows both item-granted events. dev-kafka
                // (librdkafka's mock cluster) cannot and answers "at the end", so there --since shows nothing of the
                // past; it still starts, follows every topic and exits 0 on SIGINT.
                (["--since", "10m", "--type", "item-granted"], cluster.kafka.kind == .mock ? 0 : 2, SIGINT),
                (["--from-beginning", "--type", "item-granted"], 2, SIGTERM),
                (
                    ["--from-beginning", "--type", "dead-letter", "--type", "item-granted", "--user", "u-bad"], 1,
                    SIGTERM
                ),
            ]
            let tails = try runs.enumerated().map { index, run in
                try ChildProcess(
                    "events-tail-\(index)", ["events", "tail"] + run.arguments, environment: environment,
                    folder: cluster.folder)
            }
            for (run, filtered) in zip(runs, tails) {
                for topic in ["iap.item-granted", "iap.consume-failed", "purchase.completed.dlq"] {
                    try await filtered.waitForText("following \(topic) (1 partition(s))")
                }
                try await cluster.waitFor("\(run.arguments) printed \(run.count)", within: 60, workers: [filtered]) {
                    filtered.lines.count >= run.count
                }
            }
            try await Task.sleep(for: .seconds(2))
            for (run, filtered) in zip(runs, tails) {
                #expect(filtered.lines.count == run.count, "\(run.arguments):\n\(filtered.output)")
                #expect(try await filtered.sendSignal(run.signal, within: 30) == 0, "\(run.arguments) exits 0")
                #expect(!filtered.output.contains("SECRET") && !filtered.output.contains("tok-"))
            }
            let byArguments = Dictionary(
                uniqueKeysWithValues: zip(runs.map { $0.arguments.joined(separator: " ") }, tails))
            #expect(byArguments["--from-beginning --user u0"]?.lines.first?.contains("paymentSeq=p0 userId=u0") == true)
            #expect(
                byArguments["--from-beginning --type dead-letter --type item-granted --user u-bad"]?.lines.first?
                    .contains("dead-letter") == true)

            let json = try #require(byArguments["--from-beginning --json"]).lines.map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
            }
            let schema = try SchemaValidator.load("events-tail-line")
            for line in json { #expect(schema.violations(of: line).isEmpty, "\(schema.violations(of: line))") }
            #expect(json.filter { $0["type"] as? String == "item-granted" }.count == 2)
            #expect(json.filter { $0["type"] as? String == "consume-failed" }.count == 3)
            let deadLetter = try #require(
                json.first { $0["type"] as? String == "dead-letter" && $0["paymentSeq"] as? String == "p-bad" })
            #expect(
                deadLetter["originalTopic"] as? String == "purchase.completed"
                    && deadLetter["originalOffset"] as? Int == 0)
            let hostile = try #require(json.first { $0["paymentSeq"] as? String == "p-hostile" })
            #expect((hostile["userId"] as? String)?.hasPrefix("evil\n1970") == true, "JSON keeps the value, escaped")

            // The tails never touched the workers' group: the worker was assigned its partitions once, never revoked.
            #expect(worker.logLines(containing: "partitions revoking").isEmpty)
            #expect(worker.isRunning)
            #expect(try await worker.terminate() == 0)
        }
    }
}

extension ChildProcess {
    /// Standard output's lines so far.
    var lines: [String] {
        ((try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Waits until standard output or error contains `text`; fails when the process exits first or after `seconds`.
    func waitForText(_ text: String, within seconds: Double = 30) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if output.contains(text) { return }
            guard isRunning else { throw ProcessTestError("\(name) exited before printing \"\(text)\":\n\(output)") }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ProcessTestError("\(name) did not print \"\(text)\" within \(seconds) s:\n\(output)")
    }

    /// Sends `signal` and waits for the exit; the exit status, or -1 when it had to be killed.
    func sendSignal(_ signal: Int32, within seconds: Double) async throws -> Int32 {
        kill(pid, signal)
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning {
            guard Date() < deadline else {
                kill(pid, SIGKILL)
                return -1
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return process.terminationStatus
    }
}

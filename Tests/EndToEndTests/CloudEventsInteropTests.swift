import App
import Foundation
import Gamebase
import GamebaseSimulator
import Kafka
import Testing

/// The worker's real events, from a mixed run on the mock cluster, read by a consumer no one here wrote: the
/// official CloudEvents Python SDK (PyPI `cloudevents`), with every `data` validated against docs/schemas.
@Suite("CloudEvents interop", .serialized, .timeLimit(.minutes(6)))
struct CloudEventsInteropTests {
    typealias System = EndToEndSystem

    static var root: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    @Test func theOfficialSDKReadsEveryEventOfAMixedRun() async throws {
        var payments = (0..<6).map { System.payment("ce\($0)", user: "u\($0)") }
        payments.append(System.payment("ce-sub", user: "u-sub", type: GamebaseProductType.autoRenewable))
        payments.append(System.payment("ce-else", user: "u-else", consumed: true))
        try await System.run(payments: payments) { system in
            var messages: [(String, String)] = (0..<6).map { ("u\($0)", System.message("ce\($0)", user: "u\($0)")) }
            messages += [
                ("dup", System.message("ce0", user: "u0")), ("thief", System.message("ce1", user: "thief")),
                ("f", System.message("ce2", user: "u2", token: "forged")),
                ("u-sub", System.message("ce-sub", user: "u-sub")),
                ("u-else", System.message("ce-else", user: "u-else")), ("m1", "not json"), ("m2", #"{"userId":7}"#),
            ]
            try await system.produce(messages)
            let expected = messages.count
            var configuration = system.configuration()
            configuration.refunds.googlePackageName = RefundEndToEndTests.package
            try await system.withWorker(configuration) { parts in
                try await system.eventually("every message has its outcome") {
                    parts.metrics.purchaseCounts.values.reduce(0, +) >= expected
                }
                // Two grants refunded, one of them partly: their item-revoked events.
                try await system.produce(
                    [
                        ("n", RefundEndToEndTests.voided("GPA.ce3")),
                        ("n", RefundEndToEndTests.voided("GPA.ce4", refundType: 2)),
                    ], to: "store.notifications")
                try await system.eventually("both refunds revoke their grants") {
                    String(decoding: parts.metrics.exposition(), as: UTF8.self).contains(
                        #"iap_store_notifications_total{store="google",type="refund",result="revoked"} 2"#)
                }
            }
            let records =
                try await system.read("iap.item-granted") + system.read("iap.consume-failed")
                + system.read("iap.item-revoked")
            #expect(
                records.count == 6 + 6 + 2,
                "six grants; thief, forged, subscription, consumed elsewhere, two malformed; two revocations")
            let reasons = Dictionary(
                uniqueKeysWithValues: records.filter { $0.topic == "iap.item-revoked" }.compactMap { record in
                    record.eventID.map { ($0, record.reason ?? "-") }
                })
            #expect(reasons == ["ce3:item-revoked": "refund", "ce4:item-revoked": "partial_refund"])
            let file = FileManager.default.temporaryDirectory.appendingPathComponent(
                "ce-records-\(UUID().uuidString).json")
            try Self.dump(records).write(to: file)
            let (status, output) = try Self.runInterop(file)
            #expect(status == 0, "\(output)")
            #expect(output.contains("6 item-granted and 6 consume-failed read and valid, 0 failed"), "\(output)")
            #expect(output.contains("revocations: 2 item-revoked and 0 refund-reversed read and valid"), "\(output)")
        }
    }

    /// The records as the interop script reads them: key, value and headers in base64.
    static func dump(_ records: [KafkaMessage]) throws -> Data {
        let entries: [[String: Any]] = records.map { record in
            let key: Any = record.key.map { Data($0).base64EncodedString() } ?? NSNull()
            let headers: [[Any]] = record.headers.map { header in
                let value: Any = header.value.map { Data($0).base64EncodedString() } ?? NSNull()
                return [header.name, value]
            }
            return [
                "topic": record.topic, "key": key, "value": Data(record.value).base64EncodedString(),
                "headers": headers,
            ]
        }
        return try JSONSerialization.data(withJSONObject: ["records": entries], options: [.sortedKeys])
    }

    /// Runs `scripts/cloudevents-interop.py` with the python of `scripts/cloudevents-venv.sh` (which installs the
    /// SDK on first use).
    static func runInterop(_ file: URL) throws -> (Int32, String) {
        let python = try run(
            "/bin/bash", [root.appendingPathComponent("scripts/cloudevents-venv.sh").path], stderr: false
        ).output
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return try run(python, [root.appendingPathComponent("scripts/cloudevents-interop.py").path, file.path])
    }

    static func run(_ executable: String, _ arguments: [String], stderr: Bool = true) throws -> (
        status: Int32, output: String
    ) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = root
        let pipe = Pipe()
        process.standardOutput = pipe
        if stderr { process.standardError = pipe }
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

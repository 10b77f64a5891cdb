import App
import Foundation
import Gamebase
import GamebaseSimulator
import IAPTestSupport
import Kafka
import Testing

@testable import SystemTestSupport

/// The worker's real events, from a mixed run on the mock cluster, read by a consumer no one here wrote: the
/// official CloudEvents Python SDK (PyPI `cloudevents`), with every `data` validated against docs/schemas.
@Suite("CloudEvents interop", .serialized, .timeLimit(.minutes(6)))
struct CloudEventsInteropTests {
    typealias System = EndToEndSystem

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
            configuration.refunds.googlePackageName = GoogleNotifications.package
            try await system.withWorker(configuration) { parts in
                try await system.eventually("every message has its outcome") {
                    parts.metrics.purchaseCounts.values.reduce(0, +) >= expected
                }
                // Two grants refunded, one of them partly twice and then whole: their item-revoked events, the later
                // ones numbered.
                try await system.produce(
                    [
                        ("n", GoogleNotifications.voided("GPA.ce3")),
                        ("n", GoogleNotifications.voided("GPA.ce4", refundType: 2)),
                        ("n", GoogleNotifications.voided("GPA.ce4", time: 1_764_000_001_123, refundType: 2)),
                        ("n", GoogleNotifications.voided("GPA.ce4", time: 1_764_000_002_123)),
                    ], to: "store.notifications")
                try await system.eventually("every refund revokes") {
                    String(decoding: parts.metrics.exposition(), as: UTF8.self).contains(
                        #"iap_store_notifications_total{store="google",type="refund",result="revoked"} 4"#)
                }
            }
            let records =
                try await system.read("iap.item-granted") + system.read("iap.consume-failed")
                + system.read("iap.item-revoked")
            #expect(
                records.count == 6 + 6 + 4,
                "six grants; thief, forged, subscription, consumed elsewhere, two malformed; four revocations")
            let reasons = Dictionary(
                uniqueKeysWithValues: records.filter { $0.topic == "iap.item-revoked" }.compactMap { record in
                    record.eventID.map { ($0, record.reason ?? "-") }
                })
            #expect(
                reasons == [
                    "ce3:item-revoked": "refund", "ce4:item-revoked": "partial_refund",
                    "ce4:item-revoked:2": "partial_refund", "ce4:item-revoked:3": "refund",
                ])
            let file = FileManager.default.temporaryDirectory.appendingPathComponent(
                "ce-records-\(UUID().uuidString).json")
            try OutsideTools.cloudEventsRecords(records).write(to: file)
            let (status, output) = try OutsideTools.readWithCloudEventsSDK(file)
            #expect(status == 0, "\(output)")
            #expect(output.contains("6 item-granted and 6 consume-failed read and valid, 0 failed"), "\(output)")
            #expect(output.contains("revocations: 4 item-revoked and 0 refund-reversed read and valid"), "\(output)")
        }
    }
}

import AppStoreHTTP
import AsyncHTTPClient
import Foundation
import Fulfilment
import NIOCore
import NIOHTTP1
import Stores
import Testing

@testable import SystemTestSupport

/// `iap-dev app-store-sim` as a developer uses it: what it prints points a worker at it — the key file signs tokens it
/// accepts, its notifications verify to the root file it wrote, and refunds added while it runs are served.
@Suite("iap-dev app-store-sim", .serialized, .timeLimit(.minutes(2)))
struct AppStoreSimCommandTests {
    @Test func itsPrintedVariablesPointAWorkerAtItAndItsNotificationsVerifyToItsRoot() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "asim-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let bundle = "com.studio.game"
        let simulator = try ChildProcess(
            "app-store-sim",
            [
                "app-store-sim", "--port", "0", "--bundle-id", bundle, "--files",
                folder.appendingPathComponent("keys").path,
                "--refund", "2000000000000042", "--consumption-request", "2000000000000043",
            ], folder: folder)
        let deadline = Date().addingTimeInterval(20)
        while simulator.output.split(separator: "\n").count < 8, Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        let lines = simulator.output.split(separator: "\n").map(String.init)
        #expect(lines.count == 8, "\(simulator.diagnosticOutput)")
        var variables: [String: String] = [:]
        for line in lines.dropFirst() {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { variables[parts[0]] = parts[1] }
        }
        let url = try #require(lines.first)
        #expect(variables["REFUNDS_APPLE_BASE_URL"] == url)
        #expect(variables["REFUNDS_APPLE_BUNDLE_ID"] == bundle)
        #expect(variables["REFUNDS_APPLE_ENVIRONMENT"] == "production")
        let keyFile = try #require(variables["REFUNDS_APPLE_PRIVATE_KEY_FILE"])
        let permissions = try FileManager.default.attributesOfItem(atPath: keyFile)[.posixPermissions] as? Int
        #expect(permissions == 0o600, "the key is readable by its owner alone")

        let key = try AppStoreKey(
            issuerId: try #require(variables["REFUNDS_APPLE_ISSUER_ID"]),
            keyId: try #require(variables["REFUNDS_APPLE_KEY_ID"]), bundleId: bundle,
            pem: try String(contentsOfFile: keyFile, encoding: .utf8))
        let client = AppStoreClient(baseURL: url, key: key, logger: EndToEndSystem.logger)
        let root = try String(
            contentsOfFile: try #require(variables["REFUNDS_APPLE_ROOT_CERTIFICATES_FILE"]), encoding: .utf8)
        let reader = AppleBodyReader(
            settings: .init(
                verifier: try AppleJWSVerifier(rootCertificatesPEM: root), bundleId: bundle, environment: .production))
        do {
            let window = NotificationHistoryRequest(
                startDate: Date().addingTimeInterval(-3_600), endDate: Date().addingTimeInterval(60),
                notificationType: "REFUND")
            let seeded = try await client.notificationHistory(window)
            #expect(seeded.signedPayloads.count == 1)
            let read = await reader.readSignedPayload(
                try #require(seeded.signedPayloads.first), receivedAt: Date(), channel: .appleNotificationHistory)
            #expect((try? read.get())?.notification.paymentId == "2000000000000042", "\(read)")
            #expect((try? read.get())?.notification.kind == .refund)
            // A start older than the 180 days Apple keeps in production: refused as Apple refuses it.
            do {
                _ = try await client.notificationHistory(
                    NotificationHistoryRequest(
                        startDate: Date().addingTimeInterval(-181 * 86_400), endDate: Date(),
                        notificationType: "REFUND"))
                Issue.record("a 181-day window was answered")
            } catch {
                #expect(error.httpStatus == 400 && error.appleErrorCode == 4_000_012, "\(error)")
            }

            // A refund added while it runs is served at the next reading.
            var add = HTTPClientRequest(url: url + "/admin/notifications")
            add.method = .POST
            add.body = .bytes(ByteBuffer(string: #"{"type":"REFUND","transactionId":"2000000000000044"}"#))
            #expect(try await HTTPClient.shared.execute(add, timeout: .seconds(5)).status.code == 201)
            var bad = HTTPClientRequest(url: url + "/admin/notifications")
            bad.method = .POST
            bad.body = .bytes(ByteBuffer(string: #"{"type":"PURCHASE","transactionId":"1"}"#))
            #expect(try await HTTPClient.shared.execute(bad, timeout: .seconds(5)).status.code == 400)
            #expect(try await client.notificationHistory(window).signedPayloads.count == 2)

            // What a worker answers is listed.
            try await client.sendConsumptionInformation(
                transactionId: "2000000000000043",
                ConsumptionInformation(
                    deliveryStatus: "DELIVERED", customerConsented: true, sampleContentProvided: false))
            let listed = try await httpGet(url + "/admin/consumptions")
            #expect(listed.status == 200)
            #expect(listed.body.contains(#""transactionId":"2000000000000043""#), "\(listed.body)")
            #expect(listed.body.contains(#""deliveryStatus":"DELIVERED""#), "\(listed.body)")
            await client.shutdown()
        } catch {
            await client.shutdown()
            throw error
        }
        #expect(try await simulator.terminate() == 0)
    }
}

import AsyncHTTPClient
import Foundation
import Fulfilment
import GooglePlayHTTP
import Logging
import NIOCore
import NIOHTTP1
import Stores
import Testing

@testable import SystemTestSupport

/// `iap-dev google-play-sim` as a developer uses it: what it prints points a worker at it — the key file it wrote
/// gets tokens from it, the voids given at the start are listed, and a purchase voided while it runs is listed too.
@Suite("iap-dev google-play-sim", .serialized, .timeLimit(.minutes(2)))
struct GooglePlaySimCommandTests {
    @Test func itsPrintedVariablesPointAWorkerAtItAndItListsWhatItVoided() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gsim-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let package = "com.studio.game"
        let simulator = try ChildProcess(
            "google-play-sim",
            [
                "google-play-sim", "--port", "0", "--package-name", package, "--files",
                folder.appendingPathComponent("keys").path, "--voided", "GPA.1111-2222:token-of-it",
            ], folder: folder)
        let deadline = Date().addingTimeInterval(20)
        while simulator.output.split(separator: "\n").count < 4, Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        let lines = simulator.output.split(separator: "\n").map(String.init)
        #expect(lines.count == 4, "\(simulator.diagnosticOutput)")
        var variables: [String: String] = [:]
        for line in lines.dropFirst() {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { variables[parts[0]] = parts[1] }
        }
        let url = try #require(lines.first)
        #expect(variables["REFUNDS_GOOGLE_BASE_URL"] == url)
        #expect(variables["REFUNDS_GOOGLE_PACKAGE_NAME"] == package)
        let keyFile = try #require(variables["REFUNDS_GOOGLE_SERVICE_ACCOUNT_FILE"])
        let permissions = try FileManager.default.attributesOfItem(atPath: keyFile)[.posixPermissions] as? Int
        #expect(permissions == 0o600, "the key is readable by its owner alone")

        let account = try GoogleServiceAccount(json: Array(try Data(contentsOf: URL(fileURLWithPath: keyFile))))
        let client = GooglePlayClient(
            baseURL: url, packageName: package, account: account, logger: Logger(label: "google-play-sim.test"))
        let window = VoidedPurchasesRequest(startTime: Date().addingTimeInterval(-86_400), endTime: Date())
        let first = try await client.voidedPurchases(window)
        #expect(
            first.entries.compactMap {
                try? GoogleNotification.voidedPurchase($0, packageName: package).get().paymentId
            }
                == ["GPA.1111-2222"])

        // A void added while it runs is listed, and its answer is the RTDN Google sends for it: the same notification.
        var add = HTTPClientRequest(url: url + "/admin/voided")
        add.method = .POST
        add.body = .bytes(ByteBuffer(string: #"{"orderId":"GPA.3333-4444","purchaseToken":"t2","voidedQuantity":1}"#))
        let added = try await HTTPClient.shared.execute(add, timeout: .seconds(5))
        #expect(added.status.code == 201)
        let answer = try await added.body.collect(upTo: 1 << 16)
        let rtdn = try GoogleNotification.parse(Array(answer.readableBytesView), packageName: package).get()
        let second = try await client.voidedPurchases(
            VoidedPurchasesRequest(startTime: window.startTime, endTime: Date().addingTimeInterval(1)))
        let listed = second.entries.compactMap {
            try? GoogleNotification.voidedPurchase($0, packageName: package).get()
        }
        #expect(listed.map(\.paymentId) == ["GPA.1111-2222", "GPA.3333-4444"])
        #expect(listed.last?.notificationId == rtdn.notificationId && listed.last?.quantity == 1)
        await client.shutdown()
        #expect(try await simulator.terminate() == 0)
    }
}

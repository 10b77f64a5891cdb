import Foundation
import Fulfilment
import GooglePlaySimulator
import IAPTestSupport
import Ledger
import Testing
import _CryptoExtras

@testable import SystemTestSupport

/// Google Play's side through the built executable, with no Pub/Sub bridge: the worker polls the Google Play simulator's
/// Voided Purchases API over HTTP with a service account's JSON key (the JWT-bearer grant checked), while RTDN on the
/// topic reports some of the same voids; it is killed at a random moment of its passes. Each void revokes its grant
/// once — whole or its units — whoever reported it, and no log line shows a purchase token, an access token, the
/// assertion or the key.
@Suite("Google refunds through iap-worker processes", .serialized, .timeLimit(.minutes(6)))
struct GoogleRefundProcessTests {
    typealias Cluster = ProcessTests.Cluster

    @Test func voidsTheAPIListsRevokeOnceWhateverElseReportsThemAndAKillRepeatsNothing() async throws {
        let count = 6
        let cluster = try await Cluster.start(
            purchases: count, simulatorArguments: [],
            payments: (0..<count).map { EndToEndSystem.payment("p\($0)", user: "u\($0)") })
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let state = GooglePlaySimulatorState(
            packageName: GoogleNotifications.package, clientEmail: "worker@studio.iam.gserviceaccount.com",
            keyId: "key-1", publicKey: key.publicKey)
        // Pages of one: a pass reads several, each saved as it goes, so the kill can land between them.
        let play = GooglePlaySimulator(configuration: .init(pageSize: 1), state: state, logger: EndToEndSystem.logger)
        let served = Task { try await play.run() }
        defer { served.cancel() }
        let keyFile = cluster.folder.appendingPathComponent("google-service-account.json")
        let keyJSON = GooglePlaySimulatorState.serviceAccountKey(
            clientEmail: state.clientEmail, keyId: state.keyId, privateKey: key, tokenURI: await play.tokenURI())
        #expect(
            FileManager.default.createFile(
                atPath: keyFile.path, contents: Data(keyJSON.utf8), attributes: [.posixPermissions: 0o600]))

        let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
        var environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "google-\(UUID().uuidString.prefix(6))", maxInFlight: 16)
        environment["REFUNDS_GOOGLE_PACKAGE_NAME"] = GoogleNotifications.package
        environment["REFUNDS_GOOGLE_SERVICE_ACCOUNT_FILE"] = keyFile.path
        environment["REFUNDS_GOOGLE_BASE_URL"] = await play.baseURL()
        // Every pass reads the four voids again, a page each (the window reaches six hours back): at one pass a second
        // that is four times the 30 calls Google allows in 30 seconds. Eight seconds keeps any 30 seconds to 16.
        environment["REFUNDS_GOOGLE_INTERVAL_MS"] = "8000"
        try await cluster.producePurchases()
        let granting = try cluster.worker("worker-grants", environment)
        try await cluster.waitUntilAllConsumed(within: 120, workers: [granting], ledgerURL: ledgerURL)
        #expect(try await granting.terminate() == 0)

        // p0 voided (the API alone), p1 one unit refunded (the API alone), p2 voided and p3 one unit refunded (the API
        // and RTDN both), p4 voided (RTDN alone: an app whose voids the API does not list, say), p5 kept.
        let now = Date()
        func voided(_ i: Int, quantity: Int? = nil) -> GooglePlaySimulatorState.Voided {
            .init(
                orderId: "GPA.p\(i)", purchaseToken: "play-token-GPA.p\(i)",
                voidedTime: now.addingTimeInterval(-Double(600 - i)), voidedQuantity: quantity)
        }
        let listed = [voided(0), voided(1, quantity: 1), voided(2), voided(3, quantity: 1)]
        for entry in listed { state.add(entry) }
        try await RefundProcessTests.produce(
            [
                ("r2", listed[2].rtdn(packageName: GoogleNotifications.package)),
                ("r3", listed[3].rtdn(packageName: GoogleNotifications.package)),
                ("r4", voided(4).rtdn(packageName: GoogleNotifications.package)),
            ], bootstrap: cluster.bootstrap)

        let killed = try cluster.worker("worker-killed", environment)
        let deadline = Date().addingTimeInterval(30)
        while !killed.output.contains("store notification recorded"), killed.isRunning, Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .milliseconds(Int.random(in: 0...800)))
        killed.kill9()

        let last = try cluster.worker("worker-final", environment)
        // A kill mid-window leaves its lease (two minutes) to run out before the next reader goes on from its page.
        let revoked = try await RefundProcessTests.waitForRevocations(
            5, ledgerURL: ledgerURL, worker: last, within: 200)
        #expect(revoked == 5)
        try await AppleRefundProcessTests.waitFor("a window read to its end", ledgerURL: ledgerURL, worker: last) {
            store in
            try await store.historyPolls().first { $0.name == "google:voided" }?.lastSuccess != nil
        }
        let (revocations, recorded, kept) = try await LedgerStores.withStore(
            url: ledgerURL, logger: EndToEndSystem.logger
        ) { store in
            var revocations: [String: [Bool]] = [:]
            var recorded: [String: Int] = [:]
            for i in 0..<count {
                revocations["p\(i)"] = try await store.revocations(paymentSeq: "p\(i)").map(\.isPartial)
                recorded["p\(i)"] = try await store.notifications(
                    paymentKey: StorePaymentKey(marketId: "GG", paymentId: "GPA.p\(i)")
                ).count
            }
            return (revocations, recorded, try await store.grant(paymentSeq: "p5"))
        }
        #expect(
            revocations == ["p0": [false], "p1": [true], "p2": [false], "p3": [true], "p4": [false], "p5": []],
            "each void revokes once, the partial ones their units")
        #expect(
            recorded == ["p0": 1, "p1": 1, "p2": 1, "p3": 1, "p4": 1, "p5": 0],
            "a void both RTDN and the API report is recorded once")
        #expect(kept?.state == .consumed)
        // The window read to its end may have been the killed worker's, and its next pass's lease (two minutes) may
        // still run: the last worker counts a complete pass of its own once that lease has ended.
        let admin = "http://127.0.0.1:\(try await last.adminPort())"
        try await waitUntil(
            "the last worker counts a complete Google pass", within: .seconds(150), every: .milliseconds(200)
        ) {
            try await httpGet("\(admin)/metrics").body.contains(
                #"iap_store_polls_total{store="google",result="complete"}"#)
        }
        let metrics = try await httpGet("\(admin)/metrics").body
        #expect(metrics.contains(#"iap_store_poll_interval_seconds{store="google"} 8"#), "\(metrics)")
        #expect(try await last.terminate() == 0)

        let events = try await RefundProcessTests.messages("iap.item-revoked", bootstrap: cluster.bootstrap)
        let sources = Dictionary(
            events.map { ($0.eventID ?? "-", (($0.json["data"] as? [String: Any])?["source"] as? String) ?? "-") },
            uniquingKeysWith: { first, _ in first })
        #expect(Set(sources.keys) == Set((0..<5).map { "p\($0):item-revoked" }))
        #expect(sources["p0:item-revoked"] == "google-voided-purchases-api")
        #expect(sources["p4:item-revoked"] == "google-rtdn")
        #expect(state.calls["token"] ?? 0 >= 1 && state.calls["token_refused"] == nil)
        #expect(state.calls["rate_limited"] == nil, "the passes kept within Google's quota")
        for worker in [granting, killed, last] {
            // Every page asked with the query its token came from (Google takes a token with that query alone).
            #expect(worker.logLines(containing: "refused a page token").isEmpty, "\(worker.name): a token refused")
            #expect(worker.logLines(containing: "history failed").isEmpty, "\(worker.name): a failed pass")
            let output = worker.output
            #expect(!output.contains("play-token-"), "a purchase token in \(worker.name)'s log")
            #expect(!output.contains("ya29."), "an access token in \(worker.name)'s log")
            #expect(!output.contains("eyJ"), "a JWT in \(worker.name)'s log")
            #expect(!output.contains("PRIVATE KEY"), "the key in \(worker.name)'s log")
        }
    }

    /// `check-config` asks Google with the service account: ok with the key Google holds, FAILED and a failing status
    /// with another (the token endpoint refuses it), never the key or a token in what it prints.
    @Test func checkConfigSaysWhetherTheServiceAccountReadsTheVoidedPurchases() async throws {
        let cluster = try await ProcessCluster.start(purchases: 1, simulatorArguments: [])
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let state = GooglePlaySimulatorState(
            packageName: GoogleNotifications.package, clientEmail: "worker@studio.iam.gserviceaccount.com",
            keyId: "key-1", publicKey: key.publicKey)
        let play = GooglePlaySimulator(configuration: .init(), state: state, logger: EndToEndSystem.logger)
        let served = Task { try await play.run() }
        defer { served.cancel() }
        var environment = cluster.workerEnvironment(
            ledgerURL: try await TestDatabases.freshLedgerURL(.sqlite), group: "check-\(UUID().uuidString.prefix(6))")
        environment["REFUNDS_GOOGLE_PACKAGE_NAME"] = GoogleNotifications.package
        environment["REFUNDS_GOOGLE_BASE_URL"] = await play.baseURL()
        for (name, signer) in [("right", key), ("other", try _RSA.Signing.PrivateKey(keySize: .bits2048))] {
            let file = cluster.folder.appendingPathComponent("\(name).json")
            let json = GooglePlaySimulatorState.serviceAccountKey(
                clientEmail: state.clientEmail, keyId: state.keyId, privateKey: signer, tokenURI: await play.tokenURI())
            try Data(json.utf8).write(to: file)
            environment["REFUNDS_GOOGLE_SERVICE_ACCOUNT_FILE"] = file.path
            let check = try ChildProcess(
                "check-\(name)", ["check-config"], environment: environment, folder: cluster.folder)
            let status = try await check.exitStatus(within: 60)
            if name == "right" {
                #expect(status == 0, "\(check.output)")
                #expect(check.output.contains("google    ok: worker@studio.iam.gserviceaccount.com"), "\(check.output)")
            } else {
                #expect(status != 0)
                #expect(check.output.contains("google    FAILED: unauthorized"), "\(check.output)")
            }
            #expect(!check.output.contains("PRIVATE KEY") && !check.output.contains("ya29."), "a secret printed")
        }
    }
}

import App
import AppStoreHTTP
import AppStoreSimulator
import Crypto
import Engine
import Foundation
import Fulfilment
import Gamebase
import GamebaseSimulator
import IAPTestSupport
import Kafka
import Ledger
import Testing

@testable import SystemTestSupport

/// Google's voided purchases through the worker's own composition root, on the mock cluster, the Gamebase simulator
/// and each SQL ledger: a refund of a granted purchase revokes it once; one recorded before its purchase turns the
/// purchase into a `refunded` rejection that is never consumed; refused records revoke nothing.
@Suite("Refunds end to end, in process", .serialized, .timeLimit(.minutes(4)))
struct RefundEndToEndTests {
    typealias System = EndToEndSystem
    @Test(arguments: LedgerBackend.sql)
    func refundsRevokeOnceAndARefundFirstIsNeverGranted(backend: LedgerBackend) async throws {
        let payments = [System.payment("late", user: "u-late"), System.payment("early", user: "u-early")]
        try await System.run(backend, payments: payments) { system in
            var settings = system.configuration()
            settings.refunds.googlePackageName = GoogleNotifications.package
            let configuration = settings
            try await system.withWorker(configuration) { parts in
                #expect(parts.notificationIntake != nil)
                try await system.produce([("n", GoogleNotifications.voided("GPA.early"))], to: "store.notifications")
                try await LedgerStores.withStore(url: configuration.ledgerURL, logger: System.logger) { store in
                    try await system.eventually("the early refund is kept") {
                        try await store.notifications(
                            paymentKey: StorePaymentKey(marketId: "GG", paymentId: "GPA.early")
                        )
                        .map(\.outcome) == [.pending]
                    }
                }
                try await system.produce([
                    ("u-late", System.message("late", user: "u-late")),
                    ("u-early", System.message("early", user: "u-early")),
                ])
                try await system.eventually("both purchases are decided") {
                    let text = String(decoding: parts.metrics.exposition(), as: UTF8.self)
                    return text.contains(#"iap_purchases_total{outcome="granted"} 1"#)
                        && text.contains(#"iap_purchases_total{outcome="rejected"} 1"#)
                }
                // The refund of the granted purchase: twice as the notification, once as its Pub/Sub message, and
                // records that must be refused.
                try await system.produce(
                    [
                        ("n", GoogleNotifications.voided("GPA.late")), ("n", GoogleNotifications.voided("GPA.late")),
                        ("n", GoogleNotifications.pubSub(GoogleNotifications.voided("GPA.late"), messageId: "17")),
                        ("n", GoogleNotifications.voided("GPA.late", package: "com.other.game")), ("n", "{not json"),
                    ], to: "store.notifications")
                try await system.eventually("every notification is taken in") {
                    let text = String(decoding: parts.metrics.exposition(), as: UTF8.self)
                    let counted = text.split(separator: "\n").filter { $0.hasPrefix("iap_store_notifications_total{") }
                        .compactMap { Double($0.split(separator: " ").last!) }.reduce(0, +)
                    return counted >= 6
                }
                let text = String(decoding: parts.metrics.exposition(), as: UTF8.self)
                #expect(text.contains(#"iap_revocations_total{store="google",reason="refund"} 1"#))
                #expect(text.contains(#"result="refused_other_application""#))
                #expect(text.contains(#"result="refused_malformed""#))
            }
            let revoked = try await system.read("iap.item-revoked")
            #expect(revoked.compactMap(\.eventID) == ["late:item-revoked"])
            let data = try #require(revoked.first?.json["data"] as? [String: Any])
            #expect(data["userId"] as? String == "u-late")
            #expect(data["paymentId"] as? String == "GPA.late")
            #expect(data["source"] as? String == "google-rtdn")
            #expect(String(decoding: revoked.first?.key ?? [], as: UTF8.self) == "u-late")
            let failed = try await system.read("iap.consume-failed")
            #expect(failed.compactMap(\.reason) == ["refunded"])
            #expect(system.simulator.state.consumes["early"] == nil, "a refunded purchase is never consumed")
            #expect(system.simulator.state.consumes["late"] == 1)
            let granted = try await system.read("iap.item-granted")
            #expect(granted.compactMap(\.eventID) == ["late:item-granted"])
            for message in revoked + failed {
                #expect(!String(decoding: message.value, as: UTF8.self).contains("play-token"))
            }
        }
    }

    /// The App Store's side: the worker's own poller reads the simulator's notification history over HTTP with a real
    /// ES256 token, revokes the granted purchase once however often it reads the refund again, and a key the App Store
    /// refuses is counted as a failure that revokes nothing.
    @Test func theApplePollerRevokesAGrantOnceHoweverOftenItReadsTheRefund() async throws {
        let payment = SimulatedPayment(
            PaymentTransaction(
                paymentSeq: "apple-1", userId: "u-apple", productSeq: 7, currency: "USD",
                price: Decimal(string: "0.99"),
                marketId: "AS", accessToken: "tok-apple-1", paymentId: "2000000000000001",
                productType: GamebaseProductType.consumable, gamebaseProductId: "gems_500",
                purchaseTime: "2024-05-13T10:20:30+09:00", isTestPurchase: false))
        let key = P256.Signing.PrivateKey()
        let chain = try AppleSigningChain(around: Date())
        let state = AppStoreSimulatorState(chain: chain, bundleId: GoogleNotifications.package)
        let appStore = AppStoreSimulator(
            configuration: .init(issuerId: "issuer-1", keyId: "KEY1", publicKey: key.publicKey, pageSize: 2),
            state: state, logger: System.logger)
        let served = Task { try await appStore.run() }
        defer { served.cancel() }
        let appStoreURL = await appStore.baseURL()
        try await System.run(.sqlite, payments: [payment]) { system in
            var settings = system.configuration()
            settings.refunds.appleBundleId = GoogleNotifications.package
            settings.refunds.appleRootCertificatesPEM = try chain.rootPEM
            settings.refunds.appleKey = AppStoreKey(
                issuerId: "issuer-1", keyId: "KEY1", bundleId: GoogleNotifications.package, privateKey: key)
            settings.refunds.appleBaseURL = appStoreURL
            settings.refunds.applePollInterval = .milliseconds(300)
            settings.refunds.consumptionAnswers = .init(
                customerConsented: true, refundPreference: "DECLINE", interval: .milliseconds(300))
            let configuration = settings
            try await system.withWorker(configuration) { parts in
                #expect(parts.historyPollers.map(\.store) == [.apple])
                try await system.produce([("u-apple", System.message("apple-1", user: "u-apple"))])
                try await system.eventually("the purchase is granted") {
                    String(decoding: parts.metrics.exposition(), as: UTF8.self).contains(
                        #"iap_purchases_total{outcome="granted"} 1"#)
                }
                // The player asks Apple for a refund: Apple asks for consumption information first, then refunds.
                try state.addNotification(type: "CONSUMPTION_REQUEST", transactionId: "2000000000000001")
                try await system.eventually("the consumption request is answered from the ledger") {
                    !state.consumptions.isEmpty
                }
                let answer = try #require(state.consumptions.first)
                #expect(answer.transactionId == "2000000000000001")
                #expect(answer.body["deliveryStatus"] == #""DELIVERED""#)
                #expect(answer.body["customerConsented"] == "true")
                #expect(answer.body["refundPreference"] == #""DECLINE""#)
                let now = Date()
                try state.addNotification(
                    type: "REFUND", transactionId: "2000000000000001", signedDate: now, revocationDate: now,
                    revocationReason: 1)
                try await system.eventually("the refund revokes the grant") {
                    String(decoding: parts.metrics.exposition(), as: UTF8.self).contains(
                        #"iap_revocations_total{store="apple",reason="refund"} 1"#)
                }
                // Read again by the next passes (the window overlaps): a duplicate each time, nothing new.
                let calls = state.calls["history"] ?? 0
                try await system.eventually("two more passes") { (state.calls["history"] ?? 0) >= calls + 8 }
                #expect(
                    String(decoding: parts.metrics.exposition(), as: UTF8.self).contains(
                        #"iap_store_notifications_total{store="apple",type="refund",result="duplicate"}"#))
            }
            #expect(state.consumptions.count == 1, "answered once")
            let revoked = try await system.read("iap.item-revoked")
            #expect(revoked.compactMap(\.eventID) == ["apple-1:item-revoked"])
            let data = try #require(revoked.first?.json["data"] as? [String: Any])
            #expect(data["store"] as? String == "apple")
            #expect(data["source"] as? String == "apple-notification-history")
            #expect(data["paymentId"] as? String == "2000000000000001")
            #expect(data["storeReason"] as? String == "revocationReason 1")

        }
    }

    @Test func aKeyTheAppStoreRefusesIsCountedAndRevokesNothing() async throws {
        let chain = try AppleSigningChain(around: Date())
        let state = AppStoreSimulatorState(chain: chain, bundleId: GoogleNotifications.package)
        let appStore = AppStoreSimulator(
            configuration: .init(issuerId: "issuer-1", keyId: "KEY1", publicKey: P256.Signing.PrivateKey().publicKey),
            state: state, logger: System.logger)
        let served = Task { try await appStore.run() }
        defer { served.cancel() }
        let now = Date()
        try state.addNotification(
            type: "REFUND", transactionId: "2000000000000002", signedDate: now, revocationDate: now)
        let appStoreURL = await appStore.baseURL()
        try await System.run(.sqlite, payments: []) { system in
            var settings = system.configuration()
            settings.refunds.appleBundleId = GoogleNotifications.package
            settings.refunds.appleRootCertificatesPEM = try chain.rootPEM
            settings.refunds.appleKey = AppStoreKey(
                issuerId: "issuer-1", keyId: "KEY1", bundleId: GoogleNotifications.package,
                privateKey: P256.Signing.PrivateKey())
            settings.refunds.appleBaseURL = appStoreURL
            settings.refunds.applePollInterval = .milliseconds(300)
            try await system.withWorker(settings) { parts in
                try await system.eventually("the App Store refuses the key") {
                    String(decoding: parts.metrics.exposition(), as: UTF8.self).contains(
                        #"iap_store_polls_total{store="apple",result="unauthorized"}"#)
                }
                let text = String(decoding: parts.metrics.exposition(), as: UTF8.self)
                #expect(text.contains(#"iap_store_poll_last_complete_timestamp_seconds{store="apple"} 0"#))
                #expect(!text.contains("iap_store_notifications_total"))
            }
            #expect((state.calls["unauthorized"] ?? 0) > 0)
            #expect((state.calls["history"] ?? 0) == 0, "nothing answered without a valid token")
        }
    }
}

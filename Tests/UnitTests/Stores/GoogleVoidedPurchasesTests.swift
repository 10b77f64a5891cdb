import Foundation
import Fulfilment
import GooglePlaySimulator
import IAPTestSupport
import Logging
import ServiceLifecycle
import Stores
import Testing
import _CryptoExtras

@testable import GooglePlayHTTP

/// Google Play's Voided Purchases API: the client over real HTTP against the simulator (the JWT-bearer grant, the
/// token kept and renewed, pages, partial refunds, subscriptions, the 30 days, the quotas, a refused key), and each
/// entry read — the same void the same notification whether RTDN or the API reports it.
@Suite("Google Play's Voided Purchases API", .timeLimit(.minutes(1)))
struct GoogleVoidedPurchasesTests {
    static let package = "com.studio.game"
    static let key = try! _RSA.Signing.PrivateKey(keySize: .bits2048)

    /// A simulator serving `voided`, and a client of it with the account's key (or another).
    struct Rig {
        let state: GooglePlaySimulatorState
        let simulator: GooglePlaySimulator
        let group: ServiceGroup
        let task: Task<Void, any Error>

        init(pageSize: Int = 1_000, burstQuota: Int = 30) async throws {
            var logger = Logger(label: "google-play-sim.test")
            logger.logLevel = .critical
            state = GooglePlaySimulatorState(
                packageName: GoogleVoidedPurchasesTests.package, clientEmail: "worker@sim.iam.gserviceaccount.com",
                keyId: "k1", publicKey: GoogleVoidedPurchasesTests.key.publicKey, burstQuota: burstQuota)
            simulator = GooglePlaySimulator(configuration: .init(pageSize: pageSize), state: state, logger: logger)
            group = ServiceGroup(services: [simulator], logger: logger)
            task = Task { [group] in try await group.run() }
            _ = await simulator.port()
        }

        func client(key: _RSA.Signing.PrivateKey = GoogleVoidedPurchasesTests.key, keyId: String = "k1") async throws
            -> GooglePlayClient
        {
            let json = GooglePlaySimulatorState.serviceAccountKey(
                clientEmail: "worker@sim.iam.gserviceaccount.com", keyId: keyId, privateKey: key,
                tokenURI: await simulator.tokenURI())
            let account = try GoogleServiceAccount(json: Array(json.utf8))
            return GooglePlayClient(
                baseURL: await simulator.baseURL(), packageName: GoogleVoidedPurchasesTests.package, account: account,
                logger: Logger(label: "google-play-client.test"))
        }

        func stop() async {
            await group.triggerGracefulShutdown()
            _ = await task.result
        }
    }

    static func window(days: Double = 29) -> VoidedPurchasesRequest {
        VoidedPurchasesRequest(startTime: Date().addingTimeInterval(-days * 86_400), endTime: Date())
    }

    @Test func pagesOfVoidsAreReadWithOneTokenTheEarliestFirstPartialsAndSubscriptionsIncluded() async throws {
        let rig = try await Rig(pageSize: 2)
        let now = Date()
        rig.state.add(.init(orderId: "GPA.1", purchaseToken: "t1", voidedTime: now.addingTimeInterval(-3_600)))
        rig.state.add(
            .init(orderId: "GPA.2", purchaseToken: "t2", voidedTime: now.addingTimeInterval(-7_200), voidedQuantity: 2))
        rig.state.add(
            .init(
                orderId: "GPA.3", purchaseToken: "t3", voidedTime: now.addingTimeInterval(-60), isSubscription: true))
        rig.state.add(.init(orderId: "GPA.old", purchaseToken: "t0", voidedTime: now.addingTimeInterval(-31 * 86_400)))
        let client = try await rig.client()
        var request = Self.window(days: 60)
        var orders: [String] = []
        var pages = 0
        repeat {
            let page = try await client.voidedPurchases(request)
            pages += 1
            for entry in page.entries {
                let read = try GoogleNotification.voidedPurchase(entry, packageName: Self.package).get()
                orders.append(read.paymentId ?? "-")
                if read.paymentId == "GPA.2" {
                    #expect(read.reason == RevocationRecord.googlePartialRefund && read.quantity == 2)
                } else {
                    #expect(read.reason == "REFUND_TYPE_FULL_REFUND" && read.quantity == nil)
                }
            }
            request.pageToken = page.nextPageToken
        } while request.pageToken != nil
        #expect(orders == ["GPA.2", "GPA.1", "GPA.3"], "the earliest void first; none older than 30 days")
        #expect(pages == 2)
        #expect(rig.state.calls["token"] == 1, "one access token for every page")
        await client.shutdown()
        await rig.stop()
    }

    @Test func aTokenGoogleNoLongerTakesIsReplacedAtTheNextCall() async throws {
        let rig = try await Rig()
        let client = try await rig.client()
        _ = try await client.voidedPurchases(Self.window())
        rig.state.revokeTokens()
        await #expect {
            try await client.voidedPurchases(Self.window())
        } throws: { ($0 as? StoreHistoryError)?.result == "unauthorized" }
        _ = try await client.voidedPurchases(Self.window())
        #expect(rig.state.calls["token"] == 2)
        await client.shutdown()
        await rig.stop()
    }

    @Test func anotherKeyIsRefusedAtTheTokenEndpointAndSaysSoWithoutTheKey() async throws {
        let rig = try await Rig()
        let other = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let client = try await rig.client(key: other)
        do {
            _ = try await client.voidedPurchases(Self.window())
            Issue.record("a token signed by another key was accepted")
        } catch {
            #expect(error.result == "unauthorized")
            #expect(error.description.contains("invalid_grant"), "\(error)")
            #expect(!error.description.contains("PRIVATE KEY"))
        }
        #expect(rig.state.calls["token_refused"] == 1 && rig.state.calls["list"] == nil)
        await client.shutdown()
        await rig.stop()
    }

    @Test func pastTheQuotaTheAnswerIsAQuotaWithGooglesWait() async throws {
        let rig = try await Rig(burstQuota: 2)
        let client = try await rig.client()
        _ = try await client.voidedPurchases(Self.window())
        _ = try await client.voidedPurchases(Self.window())
        do {
            _ = try await client.voidedPurchases(Self.window())
            Issue.record("a third call within 30 seconds was answered")
        } catch {
            #expect(error.kind == .quota(retryAfter: .seconds(30)))
            #expect(error.result == "rate_limited")
        }
        await client.shutdown()
        await rig.stop()
    }

    @Test func aPageTokenOfAnotherQueryIsRefusedAsATokenNotAFailure() async throws {
        let rig = try await Rig(pageSize: 1)
        for i in 0..<2 {
            rig.state.add(
                .init(orderId: "GPA.\(i)", purchaseToken: "t\(i)", voidedTime: Date().addingTimeInterval(-60)))
        }
        let client = try await rig.client()
        let first = try await client.voidedPurchases(Self.window())
        var other = Self.window(days: 10)
        let token: String = try #require(first.nextPageToken)
        other.pageToken = token
        do {
            _ = try await client.voidedPurchases(other)
            Issue.record("a token of another window was taken")
        } catch {
            #expect(error.kind == .pageTokenRefused)
        }
        await client.shutdown()
        await rig.stop()
    }

    /// A service that answers a page token with the same token would have the poller read that page for ever: the
    /// client refuses the answer as `invalid_response` (a failed pass, said and counted).
    @Test func aNextPageTokenThatRepeatsTheOneSentIsRefused() async throws {
        let rig = try await Rig(pageSize: 1)
        for i in 0..<3 {
            rig.state.add(
                .init(orderId: "GPA.\(i)", purchaseToken: "t\(i)", voidedTime: Date().addingTimeInterval(-60)))
        }
        let client = try await rig.client()
        let window = Self.window()
        let first = try await client.voidedPurchases(window)
        rig.state.repeatPageTokens()
        let token: String = try #require(first.nextPageToken)
        var request = window
        request.pageToken = token
        do {
            _ = try await client.voidedPurchases(request)
            Issue.record("a page naming its own token as the next was taken")
        } catch {
            #expect(error.result == "invalid_response" && error.kind == .failed, "\(error)")
        }
        await client.shutdown()
        await rig.stop()
    }

    /// The same void has one notification id whether RTDN or the API reports it: recorded once.
    @Test func theSameVoidReadFromRTDNAndTheAPIIsOneNotification() throws {
        let voided = GooglePlaySimulatorState.Voided(
            orderId: "GPA.3371-0000-1111-22222", purchaseToken: "token-of-it", voidedTime: Date(), voidedQuantity: 1)
        let fromAPI = try GoogleNotification.voidedPurchase(Array(voided.json.utf8), packageName: Self.package).get()
        let fromRTDN = try GoogleNotification.parse(
            Array(voided.rtdn(packageName: Self.package).utf8), packageName: Self.package
        ).get()
        #expect(fromAPI.notificationId == fromRTDN.notificationId)
        #expect(fromAPI.paymentId == fromRTDN.paymentId && fromAPI.purchaseTokenHash == fromRTDN.purchaseTokenHash)
        #expect(fromAPI.isPartialRefund && fromRTDN.isPartialRefund)
    }

    @Test(arguments: [
        (#"{"orderId":"GPA.1","voidedTimeMillis":"1764000000000"}"#, "purchaseToken is missing"),
        (#"{"purchaseToken":"t","voidedTimeMillis":"1764000000000"}"#, "orderId is missing"),
        (#"{"purchaseToken":"t","orderId":"GPA.1"}"#, "voidedTimeMillis is missing"),
        (#"{"purchaseToken":"t","orderId":"GPA.1","voidedTimeMillis":"-5"}"#, "voidedTimeMillis is not a time"),
        (
            #"{"purchaseToken":"t","orderId":"GPA.1","voidedTimeMillis":"1764000000000","voidedQuantity":-1}"#,
            "voidedQuantity is not between 0 and 1000000"
        ),
        (
            #"{"purchaseToken":"t","orderId":"GPA.1","voidedTimeMillis":"1764000000000","voidedQuantity":"2"}"#,
            "voidedQuantity is not an integer"
        ),
        (#"{"purchaseToken":"t","orderId":"GPA.1","orderId":"GPA.2","voidedTimeMillis":"1"}"#, "more than once"),
        ("[1,2]", "not a JSON object"),
        (
            #"{"purchaseToken":"t","orderId":"GPA.1","voidedTimeMillis":"1","voidedQuantity":9223372036854775807}"#,
            "voidedQuantity is not between 0 and 1000000"
        ),
    ])
    func aVoidedPurchaseMissingOrWrongInAnyFieldIsRefusedWithWhy(entry: String, why: String) {
        guard case .failure(let error) = GoogleNotification.voidedPurchase(Array(entry.utf8), packageName: Self.package)
        else {
            Issue.record("\(entry) was believed")
            return
        }
        #expect(error.detail.contains(why), "\(error.detail)")
    }

    @Test func aTokenOfEightKilobytesIsReadAndOneBeyondIsRefused() {
        func entry(_ token: String) -> [UInt8] {
            Array(#"{"purchaseToken":"\#(token)","orderId":"GPA.1","voidedTimeMillis":"1764000000000"}"#.utf8)
        }
        #expect(
            (try? GoogleNotification.voidedPurchase(
                entry(String(repeating: "a", count: 8_192)), packageName: Self.package
            ).get()) != nil)
        #expect(
            (try? GoogleNotification.voidedPurchase(
                entry(String(repeating: "a", count: 8_193)), packageName: Self.package
            ).get()) == nil)
    }

    @Test func aServiceAccountKeyFileIsCheckedWithoutEverQuotingItsKey() throws {
        let good = GooglePlaySimulatorState.serviceAccountKey(
            clientEmail: "a@b.iam.gserviceaccount.com", keyId: "k", privateKey: Self.key,
            tokenURI: "https://oauth2.googleapis.com/token")
        let account = try GoogleServiceAccount(json: Array(good.utf8))
        #expect(!account.description.contains("PRIVATE"))
        let cases = [
            good.replacingOccurrences(of: "service_account", with: "authorized_user"),
            good.replacingOccurrences(of: "BEGIN PRIVATE KEY", with: "BEGIN NOTHING"),
            good.replacingOccurrences(of: "https://oauth2.googleapis.com/token", with: "file:///etc/passwd"),
            "{}", "not json",
        ]
        for text in cases {
            do {
                _ = try GoogleServiceAccount(json: Array(text.utf8))
                Issue.record("accepted: \(text.prefix(40))")
            } catch {
                #expect(!error.description.contains("MII"), "the key is never quoted")
            }
        }
    }

    /// A page is read whatever one entry holds (over 64 KiB, nested deep): the entry's reader refuses it alone; a next
    /// page's token that is not printable ASCII fails the page, never a URL built from it.
    @Test func oneBadEntryIsRefusedAloneAndABadPageTokenFailsThePage() throws {
        let big =
            #"{"purchaseToken":"\#(String(repeating: "x", count: 70_000))","orderId":"GPA.1","voidedTimeMillis":"1"}"#
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        let good = #"{"purchaseToken":"t","orderId":"GPA.2","voidedTimeMillis":"1764000000000"}"#
        let page = try GooglePlayClient.page(Array(#"{"voidedPurchases":[\#(big),\#(deep),\#(good)]}"#.utf8))
        #expect(page.entries.count == 3)
        let read = page.entries.map { GoogleNotification.voidedPurchase($0, packageName: Self.package) }
        #expect(read.map { (try? $0.get()) != nil } == [false, false, true])
        #expect(throws: StoreHistoryError.self) {
            try GooglePlayClient.page(Array(#"{"tokenPagination":{"nextPageToken":"tö ken"}}"#.utf8))
        }
    }
}

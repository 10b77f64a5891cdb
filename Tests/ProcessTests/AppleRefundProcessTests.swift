import AppStoreSimulator
import Crypto
import Foundation
import Fulfilment
import Gamebase
import GamebaseSimulator
import IAPTestSupport
import Ledger
import Testing

@testable import SystemTestSupport

/// The App Store's side through the built executable: the worker's poller reads the App Store simulator's notification
/// history over HTTP with the studio's key (a .p8 file, as an operator configures it) and answers its consumption
/// requests, while it is killed at random moments of its passes. Every refunded grant is revoked exactly once, its event
/// reaches the topic under its one id, every consumption request is answered from the ledger, and forged notifications
/// revoke nothing.
@Suite("Apple refunds through iap-worker processes", .serialized, .timeLimit(.minutes(10)))
struct AppleRefundProcessTests {
    typealias Cluster = ProcessTests.Cluster
    static let bundleId = "com.studio.game"
    static let rounds = 4
    static let refundsPerRound = 10

    static func transactionId(_ i: Int) -> String { "20000000001\(String(format: "%05d", i))" }

    /// Gamebase's payment `p<i>` of the App Store, its transaction id the store payment id.
    static func payment(_ i: Int) -> SimulatedPayment {
        SimulatedPayment(
            PaymentTransaction(
                paymentSeq: "p\(i)", userId: "u\(i)", productSeq: 7, currency: "USD", price: Decimal(string: "0.99"),
                marketId: "AS", accessToken: "tok-p\(i)", paymentId: transactionId(i),
                productType: GamebaseProductType.consumable, gamebaseProductId: "gems_500",
                purchaseTime: "2024-05-13T10:20:30+09:00", isTestPurchase: false))
    }

    @Test func killedWhilePollingAndAnsweringNothingIsLostOrRevokedTwice() async throws {
        let refunded = Self.rounds * Self.refundsPerRound
        // One more purchase than refunds: p<refunded> is only ever "refunded" by forged notifications.
        let purchases = refunded + 1
        // One payment more at Gamebase whose message comes last, after its refund (p<purchases>).
        let early = purchases
        let cluster = try await Cluster.start(
            purchases: purchases, simulatorArguments: [], payments: (0...early).map(Self.payment))
        let key = P256.Signing.PrivateKey()
        let chain = try AppleSigningChain(around: Date())
        let state = AppStoreSimulatorState(chain: chain, bundleId: Self.bundleId)
        // Small pages: a pass reads many, each saved as the poller goes, so kills land between and within them.
        let appStore = AppStoreSimulator(
            configuration: .init(issuerId: "issuer-1", keyId: "KEY1", publicKey: key.publicKey, pageSize: 3),
            state: state, logger: EndToEndSystem.logger)
        let served = Task { try await appStore.run() }
        defer { served.cancel() }
        let appStoreURL = await appStore.baseURL()

        // The key and the test root as an operator gives them: files.
        let (keyFile, rootFile) = try Self.writeKeyAndRoot(key, chain, in: cluster.folder)

        let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
        var environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "apple-\(UUID().uuidString.prefix(6))", maxInFlight: 16)
        environment.merge(Self.appStoreVariables(url: appStoreURL, keyFile: keyFile, rootFile: rootFile)) { $1 }
        for (name, value) in [
            ("REFUNDS_APPLE_CONSUMPTION_INFO", "true"), ("REFUNDS_APPLE_CUSTOMER_CONSENTED", "true"),
            ("REFUNDS_APPLE_REFUND_PREFERENCE", "DECLINE"),
        ] {
            environment[name] = value
        }
        try await cluster.producePurchases()
        let granting = try cluster.worker("worker-grants", environment)
        try await cluster.waitUntilAllConsumed(within: 120, workers: [granting], ledgerURL: ledgerURL)
        #expect(try await granting.terminate() == 0)

        // Forged refunds of the last purchase: signed by another chain, for another app, for the sandbox.
        let forger = AppStoreSimulatorState(
            chain: try AppleSigningChain(around: Date(), name: "Forger"), bundleId: Self.bundleId)
        let victim = Self.transactionId(refunded)
        let now = Date()
        state.add(try forger.addNotification(type: "REFUND", transactionId: victim, revocationDate: now))
        try state.addNotification(type: "REFUND", transactionId: victim, revocationDate: now, bundleId: "com.other")
        try state.addNotification(type: "REFUND", transactionId: victim, revocationDate: now, environment: "Sandbox")

        // Each round: the player asks Apple for refunds (half of them first a consumption request), and a worker is
        // killed at a random moment after it began taking them in.
        var requested: Set<String> = []
        // What no log line may hold: a notification's JWS, the key.
        var signed: [String] = []
        var generator = SystemRandomNumberGenerator()
        var kills = 0
        var killedWhileTakingIn = 0
        for round in 0..<Self.rounds {
            for i in (round * Self.refundsPerRound)..<((round + 1) * Self.refundsPerRound) {
                if i % 2 == 0 {
                    signed.append(
                        try state.addNotification(type: "CONSUMPTION_REQUEST", transactionId: Self.transactionId(i))
                            .signedPayload)
                    requested.insert(Self.transactionId(i))
                }
                signed.append(
                    try state.addNotification(
                        type: "REFUND", transactionId: Self.transactionId(i), revocationDate: Date(),
                        revocationReason: 1
                    ).signedPayload)
            }
            let worker = try cluster.worker("worker-\(round)", environment)
            let deadline = Date().addingTimeInterval(30)
            while !worker.output.contains("store notification recorded"), worker.isRunning, Date() < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...1_500, using: &generator)))
            if worker.isRunning { kills += 1 }
            if worker.output.contains("store notification recorded") { killedWhileTakingIn += 1 }
            worker.kill9()
        }
        #expect(kills == Self.rounds, "every round killed a running worker")
        // A round whose worker found a lease held by a killed one waits it out and may be killed before reading.
        #expect(killedWhileTakingIn >= 2, "workers were killed while taking notifications in")

        let last = try cluster.worker("worker-final", environment)
        _ = try await last.waitForLog("HTTP endpoints listening")
        // A pass or an answer a kill cut short waits out its lease (two minutes) before this worker takes it on.
        let revoked = try await Self.waitUntilSettled(
            refunded, requests: requested.count, ledgerURL: ledgerURL, worker: last, within: 300)
        // Apple reverses three of the refunds: one refund-reversed event each, however often the history is re-read.
        let reversed = [0, 1, 2]
        for i in reversed {
            signed.append(
                try state.addNotification(type: "REFUND_REVERSED", transactionId: Self.transactionId(i)).signedPayload)
        }
        try await Self.waitUntilReversed(reversed.map { "p\($0)" }, ledgerURL: ledgerURL, worker: last, within: 200)
        // A refund that comes before its purchase: kept pending; the purchase, when its message comes, is a `refunded`
        // rejection — no grant, no Consume.
        signed.append(
            try state.addNotification(
                type: "REFUND", transactionId: Self.transactionId(early), revocationDate: Date(), revocationReason: 1
            ).signedPayload)
        try await Self.waitFor("the early refund kept pending", ledgerURL: ledgerURL, worker: last) { store in
            try await store.notifications(
                paymentKey: StorePaymentKey(marketId: "AS", paymentId: Self.transactionId(early))
            ).map(\.outcome) == [.pending]
        }
        try await cluster.produce(range: early..<(early + 1))
        try await Self.waitFor("the early purchase rejected as refunded", ledgerURL: ledgerURL, worker: last) { store in
            try await store.rejections(paymentSeq: "p\(early)").contains { $0.reason == "refunded" }
        }
        let passes = state.calls["history"] ?? 0
        while (state.calls["history"] ?? 0) < passes + 8 { try await Task.sleep(for: .milliseconds(100)) }
        let status = try await last.terminate()
        #expect(status == 0, "exit status \(status):\n\(last.diagnosticOutput)")
        #expect(revoked == refunded)

        // On the topic: each refunded grant's one event id, each reversal's, and no other (a kill between Kafka and the
        // ledger may send one twice under its id). Read by the CloudEvents SDK like the others.
        let records = try await RefundProcessTests.messages("iap.item-revoked", bootstrap: cluster.bootstrap)
        #expect(
            Set(records.compactMap(\.eventID))
                == Set((0..<refunded).map { "p\($0):item-revoked" } + reversed.map { "p\($0):refund-reversed" }))
        let unique = Dictionary(records.compactMap { record in record.eventID.map { ($0, record) } }) { first, _ in
            first
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "apple-revoked-\(UUID().uuidString).json")
        try OutsideTools.cloudEventsRecords(Array(unique.values)).write(to: file)
        let (interop, said) = try OutsideTools.readWithCloudEventsSDK(file)
        #expect(interop == 0, "\(said)")
        #expect(said.contains("revocations: \(refunded) item-revoked and 3 refund-reversed read and valid"), "\(said)")
        #expect(said.contains("read and valid, 0 failed"), "\(said)")
        // No log line of any worker holds a notification's JWS or the key.
        let keyLines = key.pemRepresentation.split(separator: "\n").filter { !$0.hasPrefix("-----") }
        for worker in [granting, last] {
            let output = worker.output
            #expect(!signed.contains { output.contains($0.prefix(60)) }, "\(worker.name) logged a JWS")
            #expect(!keyLines.contains { output.contains($0) } && !output.contains("PRIVATE KEY"), "\(worker.name)")
        }
        try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) { store in
            for i in 0..<refunded {
                let notifications = try await store.notifications(
                    paymentKey: StorePaymentKey(marketId: "AS", paymentId: Self.transactionId(i)))
                let refunds = notifications.filter { $0.notification.kind == .refund }
                #expect(refunds.count == 1, "p\(i): one refund recorded, however often it was read")
                #expect(refunds.first?.outcome == .revoked)
                let revocation = try await store.revocation(paymentSeq: "p\(i)")
                #expect(revocation?.store == .apple && revocation?.storeReason == "revocationReason 1")
                for request in notifications where request.notification.kind == .consumptionRequest {
                    let answer = try await store.consumptionAnswer(notificationId: request.notification.notificationId)
                    #expect(answer?.state == .answered && answer?.deliveryStatus == "DELIVERED", "p\(i)")
                }
            }
            #expect(try await store.grant(paymentSeq: "p\(early)") == nil, "refunded before its message: never granted")
            // The forged ones: refused, kept and counted, nothing revoked.
            #expect(try await store.revocation(paymentSeq: "p\(refunded)") == nil)
            #expect(
                try await store.notifications(paymentKey: StorePaymentKey(marketId: "AS", paymentId: victim)).isEmpty)
            let refusals = try await store.refusals(limit: 100)
            #expect(refusals.count == 3, "\(refusals.map(\.code))")
            #expect(try await store.stats().unpublishedEvents == 0)
        }
        // Apple heard from the ledger about every request: delivered, with the studio's statements. A kill between
        // Apple's answer and the ledger's record of it sends the same answer again after the claim's lease.
        #expect(try await simulatorConsumes(cluster.simulatorURL)["p\(early)"] == nil, "never consumed at Gamebase")
        let calls = state.consumptions
        #expect(Set(calls.map(\.transactionId)) == requested)
        #expect(
            calls.allSatisfy { $0.body["deliveryStatus"] == #""DELIVERED""# && $0.body["customerConsented"] == "true" })
        #expect(calls.allSatisfy { $0.body["refundPreference"] == #""DECLINE""# })
    }

    /// `refunds.apple.environment: sandbox` against an App Store that keeps the sandbox's 30 days of history and refuses
    /// an older start as Apple does (HTTP 400, errorCode 4000012). Before, the poller asked for 179 days in both
    /// environments: every pass was refused, no refund was ever read, and the failure was logged on every pass.
    @Test func inTheSandboxARefundIsReadFromTheThirtyDaysOfHistoryAndRevokesItsGrant() async throws {
        let cluster = try await Cluster.start(purchases: 1, simulatorArguments: [], payments: [Self.payment(0)])
        let key = P256.Signing.PrivateKey()
        let chain = try AppleSigningChain(around: Date())
        let state = AppStoreSimulatorState(chain: chain, bundleId: Self.bundleId, environment: "Sandbox")
        let appStore = AppStoreSimulator(
            configuration: .init(issuerId: "issuer-1", keyId: "KEY1", publicKey: key.publicKey),
            state: state, logger: EndToEndSystem.logger)
        let served = Task { try await appStore.run() }
        defer { served.cancel() }
        let (keyFile, rootFile) = try Self.writeKeyAndRoot(key, chain, in: cluster.folder)
        let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
        var environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "sandbox-\(UUID().uuidString.prefix(6))")
        environment.merge(Self.appStoreVariables(url: await appStore.baseURL(), keyFile: keyFile, rootFile: rootFile)) {
            $1
        }
        environment["REFUNDS_APPLE_ENVIRONMENT"] = "sandbox"
        try await cluster.producePurchases()
        let worker = try cluster.worker("worker", environment)
        try await cluster.waitUntilAllConsumed(within: 120, workers: [worker], ledgerURL: ledgerURL)
        try state.addNotification(
            type: "REFUND", transactionId: Self.transactionId(0), revocationDate: Date(), revocationReason: 1)
        try await Self.waitFor("the sandbox refund revokes p0", ledgerURL: ledgerURL, worker: worker, within: 60) {
            try await $0.revocation(paymentSeq: "p0")?.store == .apple
        }
        let admin = "http://127.0.0.1:\(try await worker.adminPort())"
        let metrics = try await httpGet("\(admin)/metrics").body
        #expect(metrics.contains(#"iap_store_polls_total{store="apple",result="complete"}"#), "\(metrics)")
        #expect(!metrics.contains(#"iap_store_polls_total{store="apple",result="invalid_request"}"#), "\(metrics)")
        #expect(worker.logLines(containing: "history failed").isEmpty, "no failed pass logged")
        #expect(worker.logLines(containing: "refused the window's start").isEmpty, "no window narrowed")
        #expect(try await worker.terminate() == 0)
    }

    /// Pagination tokens that expire before they are used (Apple's PaginationTokenExpiredError, errorCode 4000017): the
    /// window goes on from the pages already read, so every refund is still read, and the pass says it read the
    /// history to its end only once it has.
    @Test func aPaginationTokenExpiringMidWindowResumesFromThePagesRead() async throws {
        let count = 7
        let cluster = try await Cluster.start(
            purchases: count, simulatorArguments: [], payments: (0..<count).map(Self.payment))
        let key = P256.Signing.PrivateKey()
        let chain = try AppleSigningChain(around: Date())
        let state = AppStoreSimulatorState(chain: chain, bundleId: Self.bundleId)
        let appStore = AppStoreSimulator(
            configuration: .init(
                issuerId: "issuer-1", keyId: "KEY1", publicKey: key.publicKey, pageSize: 2, paginationTokenLifetime: 0),
            state: state, logger: EndToEndSystem.logger)
        let served = Task { try await appStore.run() }
        defer { served.cancel() }
        let (keyFile, rootFile) = try Self.writeKeyAndRoot(key, chain, in: cluster.folder)
        let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
        var environment = cluster.workerEnvironment(ledgerURL: ledgerURL, group: "token-\(UUID().uuidString.prefix(6))")
        environment.merge(Self.appStoreVariables(url: await appStore.baseURL(), keyFile: keyFile, rootFile: rootFile)) {
            $1
        }
        try await cluster.producePurchases()
        let worker = try cluster.worker("worker", environment)
        try await cluster.waitUntilAllConsumed(within: 120, workers: [worker], ledgerURL: ledgerURL)
        let start = Date().addingTimeInterval(-3_600)
        for i in 0..<count {
            let at = start.addingTimeInterval(Double(i) * 60)
            try state.addNotification(
                type: "REFUND", transactionId: Self.transactionId(i), signedDate: at, revocationDate: at,
                revocationReason: 1)
        }
        try await Self.waitFor("every refund revokes its grant", ledgerURL: ledgerURL, worker: worker) { store in
            for i in 0..<count where try await store.revocation(paymentSeq: "p\(i)") == nil { return false }
            return true
        }
        #expect(!worker.logLines(containing: "the store refused a page token").isEmpty, "tokens did expire")
        let admin = "http://127.0.0.1:\(try await worker.adminPort())"
        let deadline = Date().addingTimeInterval(30)
        var metrics = ""
        while Date() < deadline {
            metrics = try await httpGet("\(admin)/metrics").body
            if metrics.contains(#"iap_store_polls_total{store="apple",result="complete"}"#) { break }
            try await Task.sleep(for: .milliseconds(500))
        }
        #expect(metrics.contains(#"iap_store_polls_total{store="apple",result="complete"}"#), "\(metrics)")
        #expect(!metrics.contains(#"iap_store_poll_last_complete_timestamp_seconds{store="apple"} 0"#))
        #expect(try await worker.terminate() == 0)
    }

    /// Refund, reversal and refund again of one transaction, by Apple's times, however the poller reads them (it reads
    /// each type apart, so the two refunds come before the reversal): granted before, the grant ends revoked; the
    /// purchase arriving after, it is refused as `refunded`. Refund then reversal ends with the item kept, before or
    /// after the grant. Before, the reversal read last undid the revocation of a payment refunded again, and before the
    /// grant cancelled the refund although the second one stood.
    @Test func refundReversalAndRefundAgainEndAsApplesTimesSayBeforeAndAfterTheGrant() async throws {
        let cluster = try await Cluster.start(purchases: 4, simulatorArguments: [], payments: (0..<4).map(Self.payment))
        let key = P256.Signing.PrivateKey()
        let chain = try AppleSigningChain(around: Date())
        let state = AppStoreSimulatorState(chain: chain, bundleId: Self.bundleId)
        let appStore = AppStoreSimulator(
            configuration: .init(issuerId: "issuer-1", keyId: "KEY1", publicKey: key.publicKey, pageSize: 2),
            state: state, logger: EndToEndSystem.logger)
        let served = Task { try await appStore.run() }
        defer { served.cancel() }
        let (keyFile, rootFile) = try Self.writeKeyAndRoot(key, chain, in: cluster.folder)
        let ledgerURL = try await TestDatabases.freshLedgerURL(.sqlite)
        var environment = cluster.workerEnvironment(ledgerURL: ledgerURL, group: "rvr-\(UUID().uuidString.prefix(6))")
        environment.merge(Self.appStoreVariables(url: await appStore.baseURL(), keyFile: keyFile, rootFile: rootFile)) {
            $1
        }
        // p0 and p1 granted first; p2 and p3 sent only once their refunds are read.
        try await cluster.produce(range: 0..<2)
        let worker = try cluster.worker("worker", environment)
        try await Self.waitFor("p0 and p1 granted", ledgerURL: ledgerURL, worker: worker) { store in
            let p0 = try await store.grant(paymentSeq: "p0")
            let p1 = try await store.grant(paymentSeq: "p1")
            return p0?.state == .consumed && p1?.state == .consumed
        }
        let hour: TimeInterval = 3_600
        let start = Date().addingTimeInterval(-3 * hour)
        for i in 0..<4 {
            let transaction = Self.transactionId(i)
            try state.addNotification(
                type: "REFUND", transactionId: transaction, signedDate: start, revocationDate: start,
                revocationReason: 1)
            try state.addNotification(
                type: "REFUND_REVERSED", transactionId: transaction, signedDate: start.addingTimeInterval(hour))
            // p0 and p2 refunded again after the reversal.
            if i % 2 == 0 {
                let again = start.addingTimeInterval(2 * hour)
                try state.addNotification(
                    type: "REFUND", transactionId: transaction, signedDate: again, revocationDate: again,
                    revocationReason: 1)
            }
        }
        try await Self.waitFor("every notification recorded", ledgerURL: ledgerURL, worker: worker) { store in
            var count = 0
            for i in 0..<4 {
                count += try await store.notifications(
                    paymentKey: StorePaymentKey(marketId: "AS", paymentId: Self.transactionId(i))
                ).count
            }
            let unpublished = try await store.stats().unpublishedEvents
            return count == 10 && unpublished == 0
        }
        try await cluster.produce(range: 2..<4)
        try await Self.waitFor("p2 refused and p3 granted", ledgerURL: ledgerURL, worker: worker) { store in
            let refused = try await store.rejections(paymentSeq: "p2").contains { $0.reason == "refunded" }
            let p3 = try await store.grant(paymentSeq: "p3")
            return refused && p3?.state == .consumed
        }
        try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) { store throws in
            let p0 = try await store.revocations(paymentSeq: "p0")
            #expect(p0.last?.reversedBy == nil && !p0.isEmpty, "p0 ends revoked: \(p0)")
            let p1 = try await store.revocations(paymentSeq: "p1")
            #expect(p1.count == 1 && p1.last?.reversedBy != nil, "p1 ends with its refund reversed: \(p1)")
            #expect(try await store.grant(paymentSeq: "p2") == nil)
            #expect(try await store.revocations(paymentSeq: "p3").isEmpty, "p3's refund was reversed before its grant")
        }
        // What the game reads: p0's last revocation event an item-revoked, p1's a refund-reversed.
        let events = try await cluster.readTopic("iap.item-revoked")
        let last = Dictionary(
            events.map { (($0.json["subject"] as? String) ?? "-", $0.eventID ?? "-") }, uniquingKeysWith: { $1 })
        #expect(last["p0"]?.contains(":item-revoked") == true, "\(events.map(\.eventID))")
        #expect(last["p1"] == "p1:refund-reversed", "\(events.map(\.eventID))")
        #expect(last["p3"] == nil && last["p2"] == nil)
        #expect(try await worker.terminate() == 0)
    }

    /// The studio's key (a .p8) and the test root certificate, written into `folder`.
    static func writeKeyAndRoot(_ key: P256.Signing.PrivateKey, _ chain: AppleSigningChain, in folder: URL) throws
        -> (key: URL, root: URL)
    {
        let keyFile = folder.appendingPathComponent("AuthKey_KEY1.p8")
        try Data(key.pemRepresentation.utf8).write(to: keyFile)
        let rootFile = folder.appendingPathComponent("test-root.pem")
        try Data(try chain.rootPEM.utf8).write(to: rootFile)
        return (keyFile, rootFile)
    }

    /// The worker's variables for the App Store (the simulator at `url`): the key and the test root as files, as an
    /// operator gives them, a pass a second.
    static func appStoreVariables(url: String, keyFile: URL, rootFile: URL) -> [String: String] {
        [
            "REFUNDS_APPLE_BUNDLE_ID": Self.bundleId, "REFUNDS_APPLE_ISSUER_ID": "issuer-1",
            "REFUNDS_APPLE_KEY_ID": "KEY1",
            "REFUNDS_APPLE_PRIVATE_KEY_FILE": keyFile.path, "REFUNDS_APPLE_BASE_URL": url,
            "REFUNDS_APPLE_INTERVAL_MS": "1000", "REFUNDS_APPLE_ROOT_CERTIFICATES_FILE": rootFile.path,
        ]
    }

    /// Waits until `done` holds of the ledger.
    static func waitFor(
        _ what: String, ledgerURL: String, worker: ChildProcess, within seconds: Double = 120,
        _ done: @escaping @Sendable (any SQLLedgerStore) async throws -> Bool
    ) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            guard worker.isRunning else { throw ProcessTestError("\(worker.name) exited:\n\(worker.diagnosticOutput)") }
            if try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger, done) { return }
            try await Task.sleep(for: .milliseconds(250))
        }
        throw ProcessTestError("\(what): not within \(seconds) s\n\(worker.diagnosticOutput)")
    }

    /// Waits until the revocations of `seqs` are reversed, their events published.
    static func waitUntilReversed(_ seqs: [String], ledgerURL: String, worker: ChildProcess, within seconds: Double)
        async throws
    {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            guard worker.isRunning else { throw ProcessTestError("\(worker.name) exited:\n\(worker.diagnosticOutput)") }
            let done = try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) { store in
                var reversed = 0
                for seq in seqs where try await store.revocation(paymentSeq: seq)?.reversedBy != nil { reversed += 1 }
                let unpublished = try await store.stats().unpublishedEvents
                return reversed == seqs.count && unpublished == 0
            }
            if done { return }
            try await Task.sleep(for: .milliseconds(500))
        }
        throw ProcessTestError("\(seqs) not reversed within \(seconds) s\n\(worker.diagnosticOutput)")
    }

    /// Waits until the ledger holds `count` revocations with their events published and no consumption request left
    /// unanswered (`requests` of them recorded); answers how many revocations it holds.
    static func waitUntilSettled(
        _ count: Int, requests: Int, ledgerURL: String, worker: ChildProcess, within seconds: Double
    ) async throws -> Int {
        let deadline = Date().addingTimeInterval(seconds)
        var said = ""
        while Date() < deadline {
            guard worker.isRunning else { throw ProcessTestError("\(worker.name) exited:\n\(worker.diagnosticOutput)") }
            let (revoked, settled, state) = try await LedgerStores.withStore(
                url: ledgerURL, logger: EndToEndSystem.logger
            ) { store in
                var revoked = 0
                var answered = 0
                for i in 0..<count {
                    if try await store.revocation(paymentSeq: "p\(i)") != nil { revoked += 1 }
                    for request in try await store.notifications(
                        paymentKey: StorePaymentKey(marketId: "AS", paymentId: Self.transactionId(i)))
                    where request.notification.kind == .consumptionRequest {
                        if try await store.consumptionAnswer(notificationId: request.notification.notificationId)?
                            .state == .answered
                        {
                            answered += 1
                        }
                    }
                }
                let unpublished = try await store.stats().unpublishedEvents
                return (
                    revoked, revoked == count && answered == requests && unpublished == 0,
                    "\(revoked) revoked, \(answered) of \(requests) requests answered, \(unpublished) unpublished"
                )
            }
            said = state
            if settled { return revoked }
            try await Task.sleep(for: .milliseconds(500))
        }
        throw ProcessTestError("not settled within \(seconds) s: \(said)\n\(worker.diagnosticOutput)")
    }
}

import AppStoreSimulator
import Foundation
import Fulfilment
import IAPTestSupport
import InMemoryLedger
import Logging
import Stores
import Synchronization
import Testing

@testable import Engine

/// The Apple history poller over a scripted App Store (pages of signed notifications, failures on demand), the memory
/// ledger and a test clock: where each type's reading stands, resuming mid-window, one instance at a time, refusals.
@Suite("Apple history poller", .timeLimit(.minutes(1)))
struct AppleHistoryPollerTests {
    static let bundleId = "com.studio.game"

    /// An App Store answering from the simulator's notifications, a page of `pageSize` at a time (the token is the
    /// offset), failing the calls it is told to; it keeps every request.
    final class ScriptedAppStore: AppStoreServerAPI {
        let state: AppStoreSimulatorState
        let pageSize: Int
        let script = Mutex<(requests: [NotificationHistoryRequest], failures: [Int: AppStoreError])>(([], [:]))

        init(state: AppStoreSimulatorState, pageSize: Int = 2) {
            self.state = state
            self.pageSize = pageSize
        }

        var requests: [NotificationHistoryRequest] { script.withLock { $0.requests } }
        /// A clock each history call moves on, and by how much (a call that takes its time).
        let callTakes = Mutex<(clock: TestClock, duration: Duration)?>(nil)
        /// Fails the call of that index (0 for the first call ever).
        func fail(call index: Int, _ error: AppStoreError) { script.withLock { $0.failures[index] = error } }
        /// When set, a `startDate` older than the simulator's history (180 days, 30 in the sandbox) by this clock is
        /// refused as Apple refuses it: HTTP 400, errorCode 4000012.
        let keepsHistory = Mutex<TestClock?>(nil)
        /// When set, every pagination token is refused as expired (Apple's PaginationTokenExpiredError: HTTP 400,
        /// errorCode 4000017), as when tokens outlive the interval between passes.
        let tokensExpire = Mutex(false)

        func notificationHistory(_ request: NotificationHistoryRequest) async throws(AppStoreError)
            -> NotificationHistoryPage
        {
            let failure = script.withLock { script -> AppStoreError? in
                script.requests.append(request)
                return script.failures[script.requests.count - 1]
            }
            if let failure { throw failure }
            if request.paginationToken != nil, tokensExpire.withLock({ $0 }) {
                throw AppStoreError(
                    .invalidRequest, httpStatus: 400, appleErrorCode: 4_000_017, "PaginationTokenExpiredError")
            }
            if let clock = keepsHistory.withLock({ $0 }),
                request.startDate < clock.now.addingTimeInterval(-Double(state.historyDays) * 86_400)
            {
                throw AppStoreError(
                    .invalidRequest, httpStatus: 400, appleErrorCode: 4_000_012, "Get Notification History was refused")
            }
            if let takes = callTakes.withLock({ $0 }) { takes.clock.advance(by: takes.duration) }
            let matching = state.history(type: request.notificationType, start: request.startDate, end: request.endDate)
            let offset = request.paginationToken.flatMap(Int.init) ?? 0
            let page = matching.dropFirst(offset).prefix(pageSize)
            let next = offset + page.count
            return NotificationHistoryPage(
                signedPayloads: page.map(\.signedPayload), hasMore: next < matching.count,
                paginationToken: next < matching.count ? String(next) : nil)
        }

        /// The consumption answers received, and failures to answer the next ones with.
        let consumption = Mutex<(sent: [(String, ConsumptionInformation)], failures: [AppStoreError])>(([], []))

        func sendConsumptionInformation(transactionId: String, _ information: ConsumptionInformation)
            async throws(AppStoreError)
        {
            let failure = consumption.withLock { state -> AppStoreError? in
                if !state.failures.isEmpty { return state.failures.removeFirst() }
                state.sent.append((transactionId, information))
                return nil
            }
            if let failure { throw failure }
        }
    }

    struct Rig {
        let harness = EngineHarness()
        let chain: AppleSigningChain
        let appStore: ScriptedAppStore
        let poller: HistoryPoller

        /// - Parameters:
        ///   - store: the App Store's environment (`Production`, `Sandbox`): the history it keeps and signs for.
        ///   - configured: the history the poller is configured for (`refunds.apple.environment`).
        init(store: String = "Production", configured: Duration = AppleNotificationHistory.productionHistory) throws {
            chain = try AppleSigningChain(around: harness.clock.now)
            appStore = ScriptedAppStore(
                state: AppStoreSimulatorState(
                    chain: chain, bundleId: AppleHistoryPollerTests.bundleId, environment: store))
            poller = Self.poller(
                owner: "instance-a", harness: harness, chain: chain, appStore: appStore, historyKept: configured,
                environment: store == "Sandbox" ? .sandbox : .production)
        }

        /// Another instance's poller over the same ledger, App Store and clock.
        func poller(owner: String, maxPages: Int = 100) -> HistoryPoller {
            Self.poller(owner: owner, harness: harness, chain: chain, appStore: appStore, maxPages: maxPages)
        }

        static func poller(
            owner: String, harness: EngineHarness, chain: AppleSigningChain, appStore: ScriptedAppStore,
            maxPages: Int = 100, historyKept: Duration = AppleNotificationHistory.productionHistory,
            environment: AppleNotification.Environment = .production, types: [String] = ["REFUND", "REFUND_REVERSED"],
            metrics: (any EngineMetrics)? = nil, logger given: Logger? = nil
        ) -> HistoryPoller {
            var logger = Logger(label: "poller.test")
            logger.logLevel = .critical
            if let given { logger = given }
            let reader = AppleBodyReader(
                settings: .init(
                    verifier: chain.verifier, bundleId: AppleHistoryPollerTests.bundleId, environment: environment))
            return HistoryPoller(
                source: AppleNotificationHistory(
                    api: appStore, reader: reader, historyKept: historyKept, types: types),
                recorder: harness.services.refunds, positions: harness.ledger, configuration: .init(maxPages: maxPages),
                owner: owner,
                metrics: metrics ?? harness.metrics, clock: harness.clock, logger: logger)
        }

        var clock: TestClock { harness.clock }
        var ledger: MemoryLedger { harness.ledger }

        /// A grant of an App Store payment.
        func grant(_ seq: String, transactionId: String) async throws {
            let grant = GrantRecord(
                paymentSeq: seq, userId: "player-\(seq)", gamebaseProductId: "gems", purchaseToken: "tok-\(seq)",
                marketId: "AS", price: "0.99", currency: "USD", paymentId: transactionId, grantedAt: clock.now,
                eventPublishedAt: clock.now)
            _ = try await ledger.insertGrant(
                grant,
                event: EventFactory(groupID: "g", itemGrantedTopic: "iap.item-granted", consumeFailedTopic: "f")
                    .itemGranted(grant))
        }

        func refund(_ transactionId: String, hoursAgo: Double, uuid: String? = nil) throws {
            let at = clock.now.addingTimeInterval(-hoursAgo * 3_600)
            try appStore.state.addNotification(
                type: "REFUND", transactionId: transactionId, signedDate: at, revocationDate: at, revocationReason: 0,
                uuid: uuid ?? UUID().uuidString.lowercased())
        }
    }

    @Test func theFirstPassReadsTheWholeHistoryAndTheNextFromWhereItEnded() async throws {
        let rig = try Rig()
        try await rig.grant("700", transactionId: "2000000000000700")
        for i in 0..<5 { try rig.refund("20000000000009\(i)0", hoursAgo: Double(100 + i)) }  // payments never granted
        try rig.refund("2000000000000700", hoursAgo: 24 * 150)

        let first = await rig.poller.pollOnce()
        #expect(first.notifications == 6 && first.refused == 0 && first.failed == 0)
        #expect(first.pages == 3 + 1, "REFUND: six notifications in pages of two, plus one empty REFUND_REVERSED page")
        let window = try #require(rig.appStore.requests.first)
        #expect(window.startDate == rig.clock.now.addingTimeInterval(-179 * 86_400))
        #expect(window.endDate == rig.clock.now)
        #expect(try await rig.ledger.revocation(paymentSeq: "700")?.store == .apple)
        #expect(rig.harness.publisher.records(on: "iap.item-revoked").count == 1)
        #expect(rig.harness.metrics.values.applePollSucceededAt == rig.clock.now.timeIntervalSince1970)
        let marks = try await rig.ledger.historyPolls()
        #expect(marks.map(\.name) == ["apple:REFUND", "apple:REFUND_REVERSED"])
        #expect(marks.allSatisfy { $0.paginationToken == nil && $0.windowEnd == rig.clock.now })

        rig.clock.advance(by: .seconds(300))
        let second = await rig.poller.pollOnce()
        let next = try #require(rig.appStore.requests.dropFirst(5).first)
        #expect(next.startDate == rig.clock.now.addingTimeInterval(-300 - 21_600), "six hours' overlap")
        #expect(second.notifications == 0)
        #expect(rig.harness.publisher.records(on: "iap.item-revoked").count == 1, "nothing new")
    }

    /// `refunds.apple.environment: sandbox`: Apple keeps 30 days of history there and refuses an older start
    /// (before, the poller asked for 179 days and every pass was refused, for ever).
    @Test func aSandboxPollerAsksForTheThirtyDaysTheSandboxKeeps() async throws {
        let rig = try Rig(store: "Sandbox", configured: AppleNotificationHistory.sandboxHistory)
        rig.appStore.keepsHistory.withLock { $0 = rig.clock }
        try await rig.grant("701", transactionId: "2000000000000701")
        try rig.refund("2000000000000701", hoursAgo: 24 * 20)
        let pass = await rig.poller.pollOnce()
        #expect(pass.failed == 0 && pass.notifications == 1, "\(pass)")
        #expect(rig.appStore.requests.first?.startDate == rig.clock.now.addingTimeInterval(-29 * 86_400))
        #expect(try await rig.ledger.revocation(paymentSeq: "701")?.store == .apple)
        #expect(rig.harness.metrics.values.applePollSucceededAt == rig.clock.now.timeIntervalSince1970)
    }

    /// A store that keeps less history than the poller was configured for (a sandbox key configured as production):
    /// the refused start narrows the window, by halves, until Apple takes it; the pass goes on and fails nothing.
    @Test func aStartAppleRefusesAsTooFarInThePastNarrowsTheWindowAndReadingGoesOn() async throws {
        let rig = try Rig(store: "Sandbox", configured: AppleNotificationHistory.productionHistory)
        rig.appStore.keepsHistory.withLock { $0 = rig.clock }
        // The reader trusts the sandbox here, as a worker configured for it would; the history is what is wrong.
        try await rig.grant("702", transactionId: "2000000000000702")
        try rig.refund("2000000000000702", hoursAgo: 24 * 10)
        let pass = await rig.poller.pollOnce()
        #expect(pass.failed == 0 && pass.notifications == 1, "\(pass)")
        let starts = rig.appStore.requests.filter { $0.notificationType == "REFUND" }.map {
            (rig.clock.now.timeIntervalSince($0.startDate) / 86_400).rounded()
        }
        #expect(starts == [179, 90, 45, 22], "\(starts)")
        #expect(try await rig.ledger.revocation(paymentSeq: "702") != nil)
        // The next window starts an overlap before this one's end: no refusal again.
        rig.clock.advance(by: .seconds(300))
        let calls = rig.appStore.requests.count
        #expect(await rig.poller.pollOnce().failed == 0)
        #expect(rig.appStore.requests.count == calls + 2, "one call per type")
    }

    @Test func aFailureMidWindowIsResumedFromItsPageNextPass() async throws {
        let rig = try Rig()
        try await rig.grant("710", transactionId: "2000000000000710")
        for i in 0..<4 { try rig.refund("20000000000008\(i)0", hoursAgo: Double(10 + i)) }
        try rig.refund("2000000000000710", hoursAgo: 1)  // the fifth: on the third page
        // Calls: REFUND page 1, REFUND page 2 (fails), REFUND_REVERSED page 1; next pass: REFUND page 2, page 3, ...
        rig.appStore.fail(call: 1, AppStoreError(.unavailable, httpStatus: 503, "not now"))
        let first = await rig.poller.pollOnce()
        #expect(first.failed == 1 && first.notifications == 2)
        #expect(rig.harness.metrics.values.applePollFailures == ["unavailable": 1])
        #expect(rig.harness.metrics.values.applePollSucceededAt == nil, "not every type was read")
        let mark = try #require(try await rig.ledger.historyPolls().first { $0.name == "apple:REFUND" })
        #expect(mark.paginationToken == "2", "the position keeps the page it got to")

        rig.clock.advance(by: .seconds(300))
        let second = await rig.poller.pollOnce()
        #expect(second.failed == 0 && second.notifications == 3)
        let resumed = rig.appStore.requests[3]
        #expect(resumed.paginationToken == "2")
        #expect(resumed.startDate == rig.appStore.requests[0].startDate, "the same window")
        #expect(try await rig.ledger.revocation(paymentSeq: "710") != nil)
    }

    @Test func aWindowCutShortLongerThanTheHistoryAllowsIsReadAgainFromItsStartNeverSkipped() async throws {
        let rig = try Rig()
        try await rig.grant("740", transactionId: "2000000000000101")
        for hours in [105, 104, 103, 102, 101, 100] { try rig.refund("2000000000000\(hours)", hoursAgo: Double(hours)) }
        // The first window's second page fails, and nothing works for two days.
        rig.appStore.fail(call: 1, AppStoreError(.unavailable, httpStatus: 503, "down"))
        #expect(await rig.poller.pollOnce().failed == 1)
        rig.clock.advance(by: .seconds(2 * 86_400))
        let pass = await rig.poller.pollOnce()
        #expect(pass.failed == 0)
        let restart = try #require(rig.appStore.requests.dropFirst(3).first)
        #expect(restart.paginationToken == nil)
        #expect(restart.startDate == rig.clock.now.addingTimeInterval(-179 * 86_400), "from as far back as it reaches")
        #expect(try await rig.ledger.revocation(paymentSeq: "740") != nil, "the refund of the unread page")
    }

    /// A window longer than a pass reads, whose pagination tokens expire between passes: each pass goes on from how far
    /// the pages read reach, so the window is read to its end. Before, each pass read the window again from its first
    /// page, never finished, and the poll-success metric kept advancing all the same.
    @Test func aWindowLongerThanAPassWhoseTokensExpireBetweenPassesIsReadToItsEnd() async throws {
        let rig = try Rig()
        for i in 0..<9 { try rig.refund("200000000000\(8_000 + i)", hoursAgo: Double(40 - i)) }
        rig.appStore.tokensExpire.withLock { $0 = true }
        let poller = rig.poller(owner: "instance-a", maxPages: 1)
        var passes = 0
        while rig.harness.metrics.values.applePollSucceededAt == nil, passes < 20 {
            let pass = await poller.pollOnce()
            #expect(pass.failed == 0)
            if rig.harness.metrics.values.applePollSucceededAt == nil {
                #expect(pass.incomplete == 1, "pass \(passes): a window left unfinished is said")
            }
            passes += 1
            rig.clock.advance(by: .seconds(600))
        }
        #expect(rig.harness.metrics.values.applePollSucceededAt != nil, "the window was read to its end")
        // A page of two a pass, the first of each a second before the latest read (read again, recorded once).
        #expect(passes <= 10, "\(passes) passes")
        #expect((rig.harness.metrics.values.storePolls["apple/incomplete"] ?? 0) == passes - 1)
        #expect(rig.harness.metrics.values.storePolls["apple/complete"] == 1)
        #expect(
            rig.harness.metrics.values.storeNotifications.filter {
                $0.key.hasPrefix("apple/refund/") && !$0.key.hasSuffix("/duplicate")
            }.values.reduce(0, +) == 9)
    }

    /// The completion gauge comes from the ledger's positions: a type left unfinished holds it back whichever instance
    /// passes, and an instance that reads nothing itself (every type not due) still reports the history's state.
    @Test func theCompletionGaugeIsTheEarliestTypeReadToItsEndByAnyInstance() async throws {
        let rig = try Rig()
        for i in 0..<5 { try rig.refund("200000000000\(8_100 + i)", hoursAgo: Double(30 - i)) }
        let a = rig.poller(owner: "instance-a", maxPages: 1)
        #expect(await a.pollOnce().incomplete == 1)
        #expect(rig.harness.metrics.values.applePollSucceededAt == nil, "REFUND is not read to its end")
        while await a.pollOnce().incomplete > 0 {}
        let finished = try #require(rig.harness.metrics.values.applePollSucceededAt)
        // Another instance, started afresh: every type is not due, it reads nothing, and says the same.
        let metrics = RecordingMetrics()
        let other = Rig.poller(
            owner: "instance-b", harness: rig.harness, chain: rig.chain, appStore: rig.appStore, metrics: metrics)
        let pass = await other.pollOnce()
        #expect(pass.notDue == 2 && pass.pages == 0)
        #expect(metrics.values.applePollSucceededAt == finished)
    }

    @Test func aPaginationTokenAppleNoLongerTakesMakesTheWindowGoOnFromThePagesRead() async throws {
        let rig = try Rig()
        try await rig.grant("750", transactionId: "2000000000000150")
        for i in 0..<4 { try rig.refund("20000000000007\(i)0", hoursAgo: Double(10 + i)) }
        try rig.refund("2000000000000150", hoursAgo: 1)
        rig.appStore.fail(call: 1, AppStoreError(.invalidRequest, httpStatus: 400, appleErrorCode: 4_000_006, "token"))
        let pass = await rig.poller.pollOnce()
        #expect(pass.failed == 0)
        #expect(rig.appStore.requests[2].paginationToken == nil, "a new first page")
        #expect(
            rig.appStore.requests[2].startDate == rig.clock.now.addingTimeInterval(-12 * 3_600 - 1),
            "from a second before the latest notification read (the second page's first), not the window's start")
        #expect(try await rig.ledger.revocation(paymentSeq: "750") != nil)
        #expect(rig.harness.publisher.records(on: "iap.item-revoked").count == 1)
    }

    @Test func anExpiredTokenIsRecoveredFromEvenWithOnePageAPass() async throws {
        let rig = try Rig()
        let onePage = Rig.poller(
            owner: "instance-a", harness: rig.harness, chain: rig.chain, appStore: rig.appStore, maxPages: 1,
            types: ["REFUND"])
        for i in 0..<3 { try rig.refund("20000000000006\(i)0", hoursAgo: Double(10 + i)) }
        #expect(await onePage.pollOnce().pages == 1)  // page 1 of 2: the position keeps the token
        rig.appStore.fail(call: 1, AppStoreError(.invalidRequest, httpStatus: 400, "token expired"))
        rig.clock.advance(by: .seconds(300))
        let pass = await onePage.pollOnce()
        #expect(pass.failed == 0 && pass.pages == 1, "the window's first page read again within the pass")
        #expect(rig.appStore.requests[2].paginationToken == nil)
    }

    @Test func oneInstanceReadsATypeAtATimeAndAFinishedWindowFreesItAtOnce() async throws {
        let rig = try Rig()
        for i in 0..<3 { try rig.refund("20000000000007\(i)0", hoursAgo: Double(2 + i)) }
        let a = rig.poller(owner: "instance-a", maxPages: 1)
        let b = rig.poller(owner: "instance-b", maxPages: 1)
        // a reads page 1 of 2 of REFUND's window and holds it on; REFUND_REVERSED's window (empty) is read to its end
        // and free at once.
        #expect(await a.pollOnce().pages == 2)
        #expect(await b.pollOnce().heldElsewhere == 1)
        // a dies mid-window: b waits out the lease a renewed with its last page, then reads on from a's page.
        rig.clock.advance(by: .seconds(119))
        #expect(await b.pollOnce().heldElsewhere == 1)
        rig.clock.advance(by: .seconds(2))
        let taken = await b.pollOnce()
        #expect(taken.heldElsewhere == 0 && taken.notifications == 1, "page 2 of REFUND's window: its last refund")
        #expect(rig.appStore.requests.contains { $0.notificationType == "REFUND" && $0.paginationToken == "2" })
        #expect(rig.harness.publisher.records.isEmpty, "nothing revoked twice (nothing granted here at all)")
        // b read both windows to their end and gave the leases up: the next pass is due an interval after each
        // window began, and then any instance takes it (never every instance at every interval).
        let early = await a.pollOnce()
        #expect(early.notDue == 2 && early.pages == 0 && early.heldElsewhere == 0)
        rig.clock.advance(by: .seconds(300))
        let next = await a.pollOnce()
        #expect(next.heldElsewhere == 0 && next.notDue == 0 && next.pages == 2)
        let after = await b.pollOnce()
        #expect(after.pages == 0 && after.heldElsewhere + after.notDue == 2, "a reads them now")
    }

    /// A long pass keeps its lease by renewing it with each page it saves: past the claim's own lease, another
    /// instance still finds the position held while the pass reads on.
    @Test func eachPageSavedRenewsTheLease() async throws {
        let rig = try Rig()
        for i in 0..<5 { try rig.refund("20000000000009\(i)0", hoursAgo: Double(2 + i)) }
        let a = rig.poller(owner: "instance-a", maxPages: 2)
        let b = rig.poller(owner: "instance-b", maxPages: 2)
        // Each call takes a minute: a claims REFUND at t0 (lease to t0 + 120 s) and saves pages 1 and 2 at t0 + 60 s
        // and t0 + 120 s, leaving page 3 for its next pass (lease to t0 + 240 s).
        rig.appStore.callTakes.withLock { $0 = (rig.clock, .seconds(60)) }
        let started = rig.clock.now
        #expect(await a.pollOnce().pages == 3)  // REFUND's pages 1 and 2, REFUND_REVERSED's only page
        rig.appStore.callTakes.withLock { $0 = nil }
        #expect(rig.clock.now == started.addingTimeInterval(180))
        // At t0 + 200 s: past the claim's lease, within the one renewed by page 2.
        rig.clock.advance(by: .seconds(20))
        let held = await b.pollOnce()
        #expect(held.heldElsewhere == 1 && held.pages == 0, "REFUND read on by a; REFUND_REVERSED not due")
    }

    @Test func aStoppedPollerGivesItsLeasesUpSoTheNextReaderGoesOnAtOnce() async throws {
        let rig = try Rig()
        for i in 0..<3 { try rig.refund("20000000000008\(i)0", hoursAgo: Double(2 + i)) }
        let a = rig.poller(owner: "instance-a", maxPages: 1)
        let b = rig.poller(owner: "instance-b", maxPages: 1)
        #expect(await a.pollOnce().pages == 2)  // REFUND's window left mid-page, its lease held
        #expect(await b.pollOnce().heldElsewhere == 1)
        await a.releaseLeases()
        let taken = await b.pollOnce()
        #expect(taken.heldElsewhere == 0 && taken.notifications == 1, "page 2 of REFUND's window, at once")
    }

    @Test func notificationsNotSignedByTheTrustedRootOrForAnotherAppAreRefusedAndRevokeNothing() async throws {
        let rig = try Rig()
        try await rig.grant("730", transactionId: "2000000000000730")
        let forger = AppStoreSimulatorState(
            chain: try AppleSigningChain(around: rig.clock.now, name: "Forger"), bundleId: Self.bundleId)
        let at = rig.clock.now.addingTimeInterval(-3_600)
        let forged = try forger.addNotification(
            type: "REFUND", transactionId: "2000000000000730", signedDate: at, revocationDate: at)
        rig.appStore.state.add(forged)
        try rig.appStore.state.addNotification(
            type: "REFUND", transactionId: "2000000000000730", signedDate: at, revocationDate: at,
            bundleId: "com.other.game")
        try rig.appStore.state.addNotification(
            type: "REFUND", transactionId: "2000000000000730", signedDate: at, revocationDate: at,
            environment: "Sandbox")
        let pass = await rig.poller.pollOnce()
        #expect(pass.refused == 3 && pass.notifications == 0)
        #expect(try await rig.ledger.revocation(paymentSeq: "730") == nil)
        #expect(rig.harness.publisher.records(on: "iap.item-revoked").isEmpty)
        let refusals = try await rig.ledger.refusals(limit: 10)
        #expect(refusals.map(\.code).sorted() == ["other_application", "other_environment", "unverified"])
        // Each keeps the notificationUUID it claims (not believed), which `find --notification-id` finds it by.
        #expect(refusals.first { $0.code == "unverified" }?.claimedId == forged.uuid)
        #expect(refusals.allSatisfy { $0.claimedId != nil })
        // Where each came from: the history's type and window, to read it again.
        for refusal in refusals {
            #expect(refusal.source?.hasPrefix("apple history REFUND ") == true, "\(refusal.source ?? "-")")
        }
        #expect(rig.harness.metrics.values.storeNotifications["apple/unknown/refused_unverified"] == 1)
    }

    @Test func aRefusedKeyIsCountedAndTheLastSuccessStaysWhereItWas() async throws {
        let rig = try Rig()
        _ = await rig.poller.pollOnce()
        let succeeded = rig.harness.metrics.values.applePollSucceededAt
        rig.clock.advance(by: .seconds(300))
        rig.appStore.fail(call: 2, AppStoreError(.unauthorized, httpStatus: 401, "revoked key"))
        rig.appStore.fail(call: 3, AppStoreError(.unauthorized, httpStatus: 401, "revoked key"))
        let pass = await rig.poller.pollOnce()
        #expect(pass.failed == 2)
        #expect(rig.harness.metrics.values.applePollFailures == ["unauthorized": 2])
        #expect(rig.harness.metrics.values.applePollSucceededAt == succeeded)
    }

    /// A failure that lasts is logged once a minute for the store, saying how many it stands for, and counted at every
    /// pass (before: a line per type and pass — four a second while the sandbox refused every window).
    @Test func aLastingFailureIsLoggedOnceAMinuteAndCountedEveryTime() async throws {
        let rig = try Rig()
        let recorder = RecordingLogHandler.Recorder()
        let poller = Rig.poller(
            owner: "instance-a", harness: rig.harness, chain: rig.chain, appStore: rig.appStore,
            logger: recorder.logger())
        for call in 0..<40 { rig.appStore.fail(call: call, AppStoreError(.unavailable, httpStatus: 503, "down")) }
        for _ in 0..<20 {
            #expect(await poller.pollOnce().failed == 2)
            rig.clock.advance(by: .seconds(5))
        }
        let lines = recorder.all.filter { $0.message.contains("history failed") }
        #expect(lines.count == 2, "at 0 s and at 60 s: \(lines.map(\.line))")
        #expect(lines.first?.metadata["log.repeated"] == nil)
        #expect(lines.last?.metadata["log.repeated"] == "23", "the 23 failures between the two")
        #expect(lines.allSatisfy { $0.metadata["iap.store"] == "apple" })
        #expect(rig.harness.metrics.values.applePollFailures == ["unavailable": 40])
    }

    /// Apple's 429: the pass stops there (the other types are not asked), and the store is not asked again before an
    /// interval has passed.
    @Test func aSpentQuotaStopsThePassAndTheStoreIsLeftAloneForAnInterval() async throws {
        let rig = try Rig()
        rig.appStore.fail(call: 0, AppStoreError(.rateLimited, httpStatus: 429, "too many requests"))
        let pass = await rig.poller.pollOnce()
        #expect(pass.quotaSpent && pass.failed == 1)
        #expect(rig.appStore.requests.count == 1, "REFUND_REVERSED is not asked after the 429")
        rig.clock.advance(by: .seconds(60))
        #expect(await rig.poller.pollOnce().pages == 0)
        #expect(rig.appStore.requests.count == 1, "nothing asked within the interval")
        // Another instance: the type whose reading met the quota is held for the wait, not read again.
        #expect(await rig.poller(owner: "instance-b").pollOnce().heldElsewhere >= 1)
        rig.clock.advance(by: .seconds(240))
        let after = await rig.poller.pollOnce()
        #expect(after.failed == 0 && after.pages >= 1, "REFUND read again once the wait is over")
        #expect(rig.harness.metrics.values.applePollFailures == ["rate_limited": 1])
    }
}

import App
import Engine
import Foundation
import Fulfilment
import Gamebase
import GamebaseHTTP
import GamebaseSimulator
import IAPTestSupport
import Ledger
import Logging
import Synchronization
import Testing

@testable import SystemTestSupport

/// One reconciliation pass against the simulator over HTTP and a real ledger: what it takes, when, and what it
/// leaves alone.
@Suite("Reconciliation passes", .serialized, .timeLimit(.minutes(3)))
struct ReconcilePassTests {
    /// The dependencies' verdicts, set by the test.
    final class Health: ReconcileHealth {
        let allows = Mutex(true)
        /// When intake last resumed, on a test clock; `nil`: it has always flowed.
        let resumed = Mutex<(at: ContinuousClock.Instant, clock: TestClock)?>(nil)
        var allowsGamebaseCalls: Bool { allows.withLock { $0 } }
        var ledgerAvailable: Bool { true }
        var processingFor: Duration? {
            resumed.withLock { $0 }.map { $0.clock.instant - $0.at } ?? .seconds(Int64.max)
        }
        let verdict = Mutex(GamebaseProbeVerdict.answers)
        func verdictAfterFailure() async -> GamebaseProbeVerdict { verdict.withLock { $0 } }
        let rejections = Mutex<[GamebaseError]>([])
        func configurationRejected(_ error: GamebaseError) { rejections.withLock { $0.append(error) } }
        func ledgerFailed(_ error: any Error) async {}
    }

    /// Keeps what the flow publishes.
    final class Publisher: EventPublisher {
        let records = Mutex<[OutboundRecord]>([])
        func publish(_ record: OutboundRecord) async throws { records.withLock { $0.append(record) } }
        func data(on topic: String) -> [[String: Any]] {
            records.withLock { $0 }.filter { $0.topic == topic }.compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.value)) as? [String: Any])?["data"] as? [String: Any]
            }
        }
    }

    struct Harness: Sendable {
        let simulator: GamebaseSimulator
        let ledger: any SQLLedgerStore
        let processor: PurchaseProcessor
        let publisher: Publisher
        let gamebase: ListFailingGamebase
        let health = Health()
        /// The passes' and the processor's time: graces and intervals pass when a test advances it, and the rate
        /// limiter's waits move it instead of taking real time.
        let clock: TestClock

        /// A pass on the harness's test clock, or on `own` (an instance's clock of its own).
        func pass(
            grace: Duration = .zero, rate: Int = 1_000, interval: Duration = .seconds(60), own: TestClock? = nil
        ) -> ReconcilePass {
            ReconcilePass(
                processor: processor, ledger: ledger,
                configuration: Reconciler.Configuration(
                    interval: interval, grace: grace, lookback: .seconds(3_600), maxCallsPerSecond: rate),
                health: health, metrics: RecordingMetrics(), clock: own ?? clock, logger: EndToEndSystem.logger)
        }

        /// A purchase message processed the usual way: its user is now one the reconciler knows.
        func message(_ seq: String, user: String) async throws {
            let value = Array(EndToEndSystem.message(seq, user: user).utf8)
            let outcome = try await processor.process(
                PurchaseInput(
                    key: nil, value: value, source: MessageSource(topic: "purchase.completed", partition: 0, offset: 0))
            )
            #expect(outcome == .granted(paymentSeq: seq, consumePending: false))
        }

        var calls: [String: Int] { simulator.state.calls }
    }

    /// Gamebase as the simulator answers it, but List Consumables fails with `listFailure` when one is set; the
    /// instants of its List calls, on the passes' clock, are kept.
    final class ListFailingGamebase: GamebaseAPI {
        let base: any GamebaseAPI
        let clock: any WorkerClock
        let listFailure = Mutex<GamebaseError?>(nil)
        let listInstants = Mutex<[ContinuousClock.Instant]>([])

        init(base: any GamebaseAPI, clock: any WorkerClock) {
            self.base = base
            self.clock = clock
        }

        func paymentTransaction(accessToken: String, transactionID: GamebaseTransactionID) async throws(GamebaseError)
            -> PaymentTransaction
        { try await base.paymentTransaction(accessToken: accessToken, transactionID: transactionID) }
        func consume(paymentSeq: String, accessToken: String, transactionID: GamebaseTransactionID)
            async throws(GamebaseError) -> ConsumeOutcome
        { try await base.consume(paymentSeq: paymentSeq, accessToken: accessToken, transactionID: transactionID) }
        func listConsumables(userId: String, marketIds: [String]?, transactionID: GamebaseTransactionID)
            async throws(GamebaseError) -> [ConsumableItem]
        {
            let now = clock.instant
            listInstants.withLock { $0.append(now) }
            if let failure = listFailure.withLock({ $0 }) { throw failure }
            return try await base.listConsumables(userId: userId, marketIds: marketIds, transactionID: transactionID)
        }
        func probe(transactionID: GamebaseTransactionID) async -> GamebaseProbeVerdict {
            await base.probe(transactionID: transactionID)
        }
    }

    static func withHarness(
        _ backend: LedgerBackend = .sqlite, payments: [SimulatedPayment], rejectTestPurchases: Bool = false,
        faults: SimulatorFaults = SimulatorFaults(unknownFieldRate: 0),
        _ body: @Sendable (Harness) async throws -> Void
    ) async throws {
        try await EndToEndSystem.run(backend, payments: payments, faults: faults) { system in
            try await LedgerStores.withStore(url: system.ledgerURL, logger: EndToEndSystem.logger) { ledger in
                let configuration = system.configuration()
                let gamebase = GamebaseClient(
                    configuration: configuration.gamebaseConfiguration, logger: EndToEndSystem.logger)
                let publisher = Publisher()
                // Now, to the whole second: the ledgers keep times to the millisecond, and on a clock that stands still
                // a sighting read back rounded up would look a moment in the future.
                let clock = TestClock(
                    now: Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down)), sleepsAdvance: true)
                let api = ListFailingGamebase(base: gamebase, clock: clock)
                let processor = PurchaseProcessor(
                    gamebase: api, ledger: ledger, publisher: publisher,
                    configuration: FulfilmentConfiguration(
                        groupID: "reconcile-test", rejectTestPurchases: rejectTestPurchases,
                        verifyRetry: configuration.retry,
                        consumeRetry: configuration.retry),
                    logger: EndToEndSystem.logger, clock: clock)
                do {
                    try await body(
                        Harness(
                            simulator: system.simulator, ledger: ledger, processor: processor, publisher: publisher,
                            gamebase: api, clock: clock)
                    )
                } catch {
                    try? await gamebase.shutdown()
                    throw error
                }
                try await gamebase.shutdown()
            }
        }
    }

    static func outcomes(_ report: ReconcilePass.Report) -> [String: ReconcilePass.Outcome] {
        Dictionary(report.findings.compactMap { f in f.paymentSeq.map { ($0, f.outcome) } }) { $1 }
    }

    @Test func aPaymentIsTakenOnlyOnceItsGraceHasPassedSinceAPassFirstSawIt() async throws {
        let payments = [EndToEndSystem.payment("m1", user: "u1"), EndToEndSystem.payment("q1", user: "u1")]
        try await Self.withHarness(payments: payments) { h in
            try await h.message("m1", user: "u1")
            let pass = h.pass(grace: .milliseconds(1_500))
            let first = await pass.run(.init())
            #expect(first.usersChecked == 1)
            #expect(Self.outcomes(first) == ["q1": .skippedGrace], "m1 is consumed, so not listed; q1 is new")
            #expect(await pass.run(.init()).outcomes == [.skippedGrace: 1], "still within its grace")
            #expect(h.simulator.state.consumes["q1"] == nil)
            // The grace runs from the first sighting, kept in the ledger: a new pass (a restarted worker) agrees.
            h.clock.advance(by: .milliseconds(1_600))
            let taken = await h.pass(grace: .milliseconds(1_500)).run(.init())
            #expect(Self.outcomes(taken) == ["q1": .granted])
            #expect(h.simulator.state.consumes["q1"] == 1)
            let grant = try #require(try await h.ledger.grant(paymentSeq: "q1"))
            #expect(grant.origin == .reconciliation && grant.state == .consumed && grant.userId == "u1")
            #expect(
                h.publisher.data(on: "iap.item-granted").map { $0["source"] as? String } == [
                    "message", "reconciliation",
                ])
            #expect(
                try await h.ledger.reconciliationSightings(
                    [ReconciliationSighting(paymentSeq: "q1", userId: "u1")], now: h.clock.now, record: false
                ).isEmpty, "forgotten once decided")
            // Consumed now: no longer listed, nothing more to do.
            #expect(await pass.run(.init()).outcomes.isEmpty)
        }
    }

    /// A step forward of the wall clock (NTP, a VM resumed) makes the sighting look two hours old: the grace is still
    /// a minute of the monotonic clock, and so is the wait after a hold of intake.
    @Test func aForwardStepOfTheWallClockCutsNoGraceShort() async throws {
        let payments = [EndToEndSystem.payment("m4", user: "u4"), EndToEndSystem.payment("q4", user: "u4")]
        try await Self.withHarness(payments: payments) { h in
            try await h.message("m4", user: "u4")
            let pass = h.pass(grace: .seconds(60))
            #expect(Self.outcomes(await pass.run(.init())) == ["q4": .skippedGrace])
            h.clock.advance(by: .seconds(10))
            h.clock.stepWall(by: .seconds(7_200))
            #expect(Self.outcomes(await pass.run(.init())) == ["q4": .skippedGrace], "taken 10 s after it was seen")
            // Intake held and resumed, then the clock steps again: the wait after the hold is not cut either.
            let resumedAt = h.clock.instant
            h.health.resumed.withLock { [clock = h.clock] in $0 = (resumedAt, clock) }
            h.clock.advance(by: .seconds(51))
            h.clock.stepWall(by: .seconds(7_200))
            #expect(Self.outcomes(await pass.run(.init())) == ["q4": .skippedGrace], "taken 51 s after a hold")
            h.clock.advance(by: .seconds(10))
            #expect(Self.outcomes(await pass.run(.init())) == ["q4": .granted])
            #expect(h.simulator.state.consumes["q4"] == 1)
        }
    }

    @Test func aHoldOfTheWorkersIntakeRestartsTheGrace() async throws {
        let payments = [EndToEndSystem.payment("m2", user: "u2"), EndToEndSystem.payment("q2", user: "u2")]
        try await Self.withHarness(payments: payments) { h in
            try await h.message("m2", user: "u2")
            let pass = h.pass(grace: .seconds(1))
            _ = await pass.run(.init())
            h.clock.advance(by: .milliseconds(1_100))
            // Intake was held until just now (an outage): messages it held back may still be on their way.
            let resumedAt = h.clock.instant
            h.health.resumed.withLock { [clock = h.clock] in $0 = (resumedAt, clock) }
            #expect(Self.outcomes(await pass.run(.init())) == ["q2": .skippedGrace])
            h.clock.advance(by: .milliseconds(1_100))
            #expect(Self.outcomes(await pass.run(.init())) == ["q2": .granted])
        }
    }

    @Test func aSubscriptionOrATestPurchaseFoundIsRejectedOnceAndNeverVerifiedAgain() async throws {
        var test = EndToEndSystem.payment("t3", user: "u3")
        test.transaction.isTestPurchase = true
        let payments = [
            EndToEndSystem.payment("m3", user: "u3"),
            EndToEndSystem.payment("s3", user: "u3", type: GamebaseProductType.autoRenewable),
            test,
        ]
        try await Self.withHarness(
            payments: payments, rejectTestPurchases: true,
            faults: SimulatorFaults(unknownFieldRate: 0, listNonConsumables: true)
        ) { h in
            try await h.message("m3", user: "u3")
            let verifications = h.calls["payment_transaction"] ?? 0
            let first = await h.pass().run(.init())
            #expect(Self.outcomes(first) == ["s3": .rejected, "t3": .rejected])
            #expect(h.calls["payment_transaction"] == verifications + 2)
            for _ in 0..<3 {
                #expect(Self.outcomes(await h.pass().run(.init())) == ["s3": .alreadyRejected, "t3": .alreadyRejected])
            }
            #expect(h.calls["payment_transaction"] == verifications + 2, "answered by the ledger, never verified again")
            #expect(h.calls["consumable"] == 4)
            #expect(try await h.ledger.grant(paymentSeq: "s3") == nil)
            #expect(try await h.ledger.grant(paymentSeq: "t3") == nil)
            #expect(h.simulator.state.consumes["s3"] == nil && h.simulator.state.consumes["t3"] == nil)
            let reasons = h.publisher.data(on: "iap.consume-failed").map { $0["reason"] as? String }
            #expect(
                reasons.sorted { ($0 ?? "") < ($1 ?? "") } == ["not_consumable", "test_purchase"],
                "one event per rejected claim")
        }
    }

    @Test func aListedPaymentGetPaymentTransactionAnswersWithAnErrorCodeIsRetriedByTheNextPassNotRejected()
        async throws
    {
        let payments = [EndToEndSystem.payment("m6", user: "u6"), EndToEndSystem.payment("q6", user: "u6")]
        try await Self.withHarness(payments: payments) { h in
            try await h.message("m6", user: "u6")
            var faults = h.simulator.state.faults
            faults.tokenResultCodes = ["tok-q6": GamebaseResultCode.consumeFailed.rawValue]
            h.simulator.state.faults = faults
            let first = await h.pass().run(.init())
            #expect(Self.outcomes(first) == ["q6": .failed])
            #expect(first.stoppedEarly == nil, "one payment's error code does not end the pass")
            #expect(try await h.ledger.rejections(paymentSeq: "q6").isEmpty)
            #expect(h.publisher.data(on: "iap.consume-failed").isEmpty)

            faults.tokenResultCodes = [:]
            h.simulator.state.faults = faults
            #expect(Self.outcomes(await h.pass().run(.init())) == ["q6": .granted], "not already_rejected")
            #expect(h.simulator.state.consumes["q6"] == 1)
        }
    }

    // The harness opens its ledger by `ledger.url` (`LedgerStores.withStore`).
    @Test(arguments: LedgerBackend.sql)
    func aListedPaymentTheFlowCannotTakeFailsAloneBeforeTheLedgerSeesItAndADuplicateIsTakenOnce(
        backend: LedgerBackend
    ) async throws {
        var duplicate = EndToEndSystem.payment("q7", user: "u7")
        duplicate.transaction.accessToken = "tok-q7-again"
        let payments = [
            EndToEndSystem.payment("m7", user: "u7"), EndToEndSystem.payment("q7", user: "u7"), duplicate,
            EndToEndSystem.payment(String(repeating: "9", count: 8_192), user: "u7"),
            EndToEndSystem.payment("nul\u{0}7", user: "u7"),
            EndToEndSystem.payment("m8", user: "u8"), EndToEndSystem.payment("q8", user: "u8"),
        ]
        try await Self.withHarness(backend, payments: payments) { h in
            try await h.message("m7", user: "u7")
            try await h.message("m8", user: "u8")
            let report = await h.pass().run(.init())
            #expect(report.stoppedEarly == nil, "\(report.stoppedEarly ?? "")")
            #expect(report.usersChecked == 2)
            #expect(report.outcomes == [.granted: 2, .failed: 2], "\(report.findings)")
            #expect(Self.outcomes(report) == ["q7": .granted, "q8": .granted])
            #expect(
                report.findings.filter { $0.outcome == .failed }.allSatisfy {
                    $0.paymentSeq == nil && $0.detail.contains("cannot take")
                })
            #expect(h.calls["payment_transaction"] == 4, "two messages, two reconciled payments: \(h.calls)")
            // The next pass finds the same items and fails them again, without ending at u7 (the other q7 entry,
            // never consumed, is answered by the ledger).
            let again = await h.pass().run(.init())
            #expect(again.stoppedEarly == nil)
            #expect(again.outcomes == [.failed: 2, .alreadyGranted: 1], "\(again.findings)")
        }
    }

    @Test(arguments: [GamebaseResultCode.undefinedAPI, .unsupportedAPIVersion])
    func aConfigurationFailureOfListConsumablesEndsThePassButNeverStopsTheMessagePath(code: GamebaseResultCode)
        async throws
    {
        let users = ["cfg-u1", "cfg-u2"]
        try await Self.withHarness(payments: users.map { EndToEndSystem.payment("cfg-\($0)", user: $0) }) { h in
            for user in users { try await h.message("cfg-\(user)", user: user) }
            h.gamebase.listFailure.withLock {
                $0 = GamebaseError(
                    code: .resultCode, api: "consumable", resultCode: code, transactionID: "t",
                    message: "not routed")
            }
            let report = await h.pass().run(.init())
            #expect(report.stoppedEarly?.contains("List Consumables") == true, "\(report.stoppedEarly ?? "")")
            #expect(report.configurationRejected, "the command exits non-zero")
            #expect(report.outcomes == [.failed: 1], "the pass stops at its first list")
            #expect(h.health.rejections.withLock { $0 }.isEmpty, "the Gamebase monitor (message intake) is not told")

            h.gamebase.listFailure.withLock { $0 = nil }
            let next = await h.pass().run(.init())
            #expect(next.stoppedEarly == nil && next.usersChecked == 2, "the next pass runs as usual")
        }
    }

    @Test func aLedgerFailureOnOneUsersPaymentsFailsThatUserAloneAndOnTwoInARowEndsThePass() async throws {
        let users = ["led-a", "led-b", "led-c"]
        let payments = users.flatMap {
            [EndToEndSystem.payment("m-\($0)", user: $0), EndToEndSystem.payment("q-\($0)", user: $0)]
        }
        try await Self.withHarness(payments: payments) { h in
            for user in users { try await h.message("m-\(user)", user: user) }
            let ledger = RefusingLedger(h.ledger)
            let processor = PurchaseProcessor(
                gamebase: h.processor.gamebase, ledger: ledger, publisher: h.publisher,
                configuration: h.processor.configuration, logger: EndToEndSystem.logger)
            let pass = ReconcilePass(
                processor: processor, ledger: h.ledger,
                configuration: Reconciler.Configuration(
                    interval: .seconds(60), grace: .zero, lookback: .seconds(3_600), maxCallsPerSecond: 1_000),
                health: h.health, metrics: RecordingMetrics(), logger: EndToEndSystem.logger)

            ledger.refusedUsers.withLock { $0 = ["led-a"] }
            let one = await pass.run(.init())
            #expect(one.stoppedEarly == nil, "\(one.stoppedEarly ?? "")")
            #expect(one.usersChecked == 3)
            #expect(Self.outcomes(one) == ["q-led-b": .granted, "q-led-c": .granted])
            #expect(one.findings.contains { $0.userId == "led-a" && $0.paymentSeq == nil && $0.outcome == .failed })

            // Users are read in order: two in a row refused is the ledger failing, which ends the pass.
            ledger.refusedUsers.withLock { $0 = ["led-a", "led-b"] }
            h.simulator.state.add([EndToEndSystem.payment("r-led-b", user: "led-b")])
            let two = await pass.run(.init())
            #expect(two.dependencyFailed && two.stoppedEarly?.contains("ledger") == true, "\(two.stoppedEarly ?? "")")
            #expect(two.usersChecked == 1)
        }
    }

    @Test func aDryRunRecordsAndGrantsNothing() async throws {
        let payments = [EndToEndSystem.payment("m4", user: "u4"), EndToEndSystem.payment("q4", user: "u4")]
        try await Self.withHarness(payments: payments) { h in
            try await h.message("m4", user: "u4")
            let dry = await h.pass(grace: .seconds(1)).run(.init(dryRun: true, claim: true))
            #expect(dry.findings.map(\.outcome) == [.skippedGrace])
            #expect(dry.findings.first?.detail.contains("not seen before") == true)
            // Without a grace, a pass would take it at once: so says the dry run.
            #expect(await h.pass().run(.init(dryRun: true)).findings.map(\.outcome) == [.wouldTake])
            #expect(
                try await h.ledger.claimReconciliationUsers(["u4"], now: h.clock.now, nextCheck: h.clock.now) == ["u4"],
                "no claim was made")
            _ = await h.pass().run(.init())
            #expect(h.simulator.state.consumes["q4"] == 1, "grace zero: the real pass took it")
            let again = await h.pass().run(.init(dryRun: true))
            #expect(again.findings.isEmpty)

            // A payment past its grace: a dry run says it would take it, and does not.
            h.simulator.state.add([EndToEndSystem.payment("q5", user: "u4")])
            _ = await h.pass(grace: .milliseconds(200)).run(.init())
            h.clock.advance(by: .milliseconds(300))
            let would = await h.pass(grace: .milliseconds(200)).run(.init(dryRun: true))
            #expect(Self.outcomes(would) == ["q5": .wouldTake])
            #expect(try await h.ledger.grant(paymentSeq: "q5") == nil)
            #expect(h.simulator.state.consumes["q5"] == nil)
        }
    }

    @Test func everyGamebaseCallOfAPassWaitsForItsTokenAndNoneIsMadeWhileCallsAreHeld() async throws {
        let users = (0..<12).map { "rate-u\($0)" }
        let payments = users.map { EndToEndSystem.payment("rate-\($0)", user: $0) }
        try await Self.withHarness(payments: payments) { h in
            for user in users {
                try await h.message("rate-\(user)", user: user)
                h.simulator.state.add([EndToEndSystem.payment("unreported-\(user)", user: user)])
            }
            h.health.allows.withLock { $0 = false }
            let held = await h.pass().run(.init())
            #expect(held.stoppedEarly?.contains("held") == true)
            #expect(h.calls["consumable"] == nil, "no call while the circuit is open")
            h.health.allows.withLock { $0 = true }

            // 12 lists, then 12 × (Get Payment Transaction + Consume): 36 calls at 10 a second, 3.5 s of the clock
            // (which the limiter's waits move, so none of it is waited in real time).
            h.gamebase.listInstants.withLock { $0 = [] }
            let started = h.clock.instant
            _ = await h.pass(rate: 10).run(.init())
            let elapsed = h.clock.instant - started
            #expect(h.simulator.state.consumedCount == 24)
            #expect(elapsed >= .milliseconds(3_400), "36 calls at 10/s take at least 3.5 s, took \(elapsed)")
            let times = h.gamebase.listInstants.withLock { $0 }
            #expect(times.count == 12)
            let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
            #expect(gaps.allSatisfy { $0 >= .milliseconds(80) }, "List calls are spaced by the rate: \(gaps)")
        }
    }

    @Test func aPassEndsWhenGamebaseStopsAnswering() async throws {
        let users = (0..<5).map { "down-u\($0)" }
        try await Self.withHarness(payments: users.map { EndToEndSystem.payment("down-\($0)", user: $0) }) { h in
            for user in users { try await h.message("down-\(user)", user: user) }
            var faults = h.simulator.state.faults
            faults.outage = true
            h.simulator.state.faults = faults
            h.health.verdict.withLock {
                $0 = .unavailable(
                    GamebaseError(code: .timeout, api: "payment_transaction", transactionID: "t", message: "down"))
            }
            let report = await h.pass().run(.init())
            #expect(report.stoppedEarly == "Gamebase does not answer")
            #expect(report.outcomes == [.failed: 1], "the first user's list failed; no other user was tried")
            #expect(h.calls["consumable"] == 3, "one list, with its retries")
        }
    }

    // The harness opens its ledger by `ledger.url` (`LedgerStores.withStore`).
    @Test(arguments: LedgerBackend.sql)
    func aPassReadsDueUsersPageAfterPageSoInstancesTogetherCheckMoreThanOnePage(backend: LedgerBackend) async throws {
        try await Self.withHarness(backend, payments: []) { h in
            let users = (0..<150).map { "page-u\($0)" }
            for user in users {
                let grant = GrantRecord(
                    paymentSeq: "page-\(user)", userId: user, gamebaseProductId: "gems_500", purchaseToken: "t-\(user)",
                    grantedAt: h.clock.now)
                _ = try await h.ledger.insertGrant(grant, event: h.processor.configuration.events.itemGranted(grant))
            }
            // 100 ms × 1,000 calls a second: pages of 100 users, the least a pass reads at once.
            let one = await h.pass(rate: 1_000, interval: .milliseconds(100)).run(.init(claim: true))
            #expect(one.usersChecked == 150, "one instance reads the second page")
            #expect(Set(h.simulator.state.listsByUser.keys) == Set(users))
            #expect(h.simulator.state.listsByUser.values.allSatisfy { $0 == 1 })

            // The next interval, two instances: each user once, between them. Each instance paces its calls on a clock
            // of its own, as two processes do side by side: on one shared clock that every wait moves, the two
            // passes' waits would add up to 150 ms, past the 99 ms their claims hold a user (an interval less a
            // hundredth), and a user claimed by one could be claimed again by the other within the same pass.
            h.clock.advance(by: .milliseconds(150))
            let (clockA, clockB) = (
                TestClock(now: h.clock.now, sleepsAdvance: true), TestClock(now: h.clock.now, sleepsAdvance: true)
            )
            async let first = h.pass(rate: 1_000, interval: .milliseconds(100), own: clockA).run(.init(claim: true))
            async let second = h.pass(rate: 1_000, interval: .milliseconds(100), own: clockB).run(.init(claim: true))
            let (a, b) = await (first, second)
            #expect(a.usersChecked + b.usersChecked == 150, "\(a.usersChecked) + \(b.usersChecked)")
            #expect(h.simulator.state.listsByUser.values.allSatisfy { $0 == 2 }, "no user listed twice in a pass")
        }
    }

    @Test func aPassOutOfTimeLeavesTheRestToTheNextWhichStartsWithThem() async throws {
        let users = (0..<10).map { "late-u\($0)" }
        try await Self.withHarness(payments: users.map { EndToEndSystem.payment("late-\($0)", user: $0) }) { h in
            for user in users { try await h.message("late-\(user)", user: user) }
            let pass = h.pass(rate: 4)
            // 250 ms of the test clock a call: the deadline falls after the second or third user.
            let short = await pass.run(.init(claim: true, deadline: h.clock.instant + .milliseconds(700)))
            #expect(
                short.usersLeft > 0 && short.usersChecked + short.usersLeft == 10,
                "\(short.usersChecked) + \(short.usersLeft)")
            #expect(short.stoppedEarly?.contains("interval") == true)
            let rest = await pass.run(.init(claim: true))
            #expect(rest.usersChecked == short.usersLeft, "claimed users wait for their next interval")
            #expect(Set(h.simulator.state.listsByUser.keys) == Set(users))
            #expect(h.simulator.state.listsByUser.values.allSatisfy { $0 == 1 })
        }
    }
}

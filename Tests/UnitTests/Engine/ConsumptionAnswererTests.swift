import AppStoreSimulator
import Foundation
import Fulfilment
import IAPTestSupport
import InMemoryLedger
import Logging
import Synchronization
import Testing

@testable import Engine

/// Answers to App Store consumption requests, on a scripted App Store, the memory ledger and a test clock: the
/// ledger's delivery evidence, retries until the 12-hour deadline, giving up, one instance per request.
@Suite("Consumption answers", .timeLimit(.minutes(1)))
struct ConsumptionAnswererTests {
    typealias Store = AppleHistoryPollerTests.ScriptedAppStore

    struct Rig {
        let harness = EngineHarness()
        let appStore: Store
        let answerer: ConsumptionAnswerer

        init() throws {
            appStore = Store(
                state: AppStoreSimulatorState(
                    chain: try AppleSigningChain(around: harness.clock.now), bundleId: "com.studio.game"))
            answerer = Self.answerer(harness, appStore)
        }

        static func answerer(_ harness: EngineHarness, _ appStore: Store) -> ConsumptionAnswerer {
            var logger = Logger(label: "answers.test")
            logger.logLevel = .critical
            return ConsumptionAnswerer(
                api: appStore, refunds: harness.ledger,
                configuration: .init(customerConsented: true, sampleContentProvided: true, refundPreference: "DECLINE"),
                metrics: harness.metrics, clock: harness.clock, logger: logger)
        }

        /// Apple asks about `transactionId`, `minutesAgo` minutes ago.
        func request(_ id: String, transactionId: String, minutesAgo: Double = 1) async throws {
            let recording = try await harness.services.refunds.record(
                StoreNotification(
                    store: .apple, kind: .consumptionRequest, storeType: "CONSUMPTION_REQUEST", notificationId: id,
                    authenticity: .signedByStore, paymentId: transactionId, application: "com.studio.game",
                    occurredAt: harness.clock.now.addingTimeInterval(-minutesAgo * 60)),
                channel: .appleNotificationHistory)
            #expect(recording.outcome == .recorded)
        }

        func grant(_ seq: String, transactionId: String, state: GrantState = .consumed) async throws {
            _ = try await harness.ledger.insertGrant(
                GrantRecord(
                    paymentSeq: seq, userId: "u", gamebaseProductId: "gems", purchaseToken: "t", marketId: "AS",
                    paymentId: transactionId, state: state, grantedAt: harness.clock.now),
                event: OutboxEvent(
                    id: "\(seq):item-granted", paymentSeq: seq, topic: "iap.item-granted", key: nil, headers: [],
                    payload: [], createdAt: harness.clock.now))
        }

        var sent: [(String, ConsumptionInformation)] { appStore.consumption.withLock { $0.sent } }
    }

    /// Delivered means consumed at Gamebase: a grant whose Consume has not gone through yet is not evidence of
    /// delivery (Gamebase still holds the purchase as unconsumed), so it is answered UNDELIVERED_OTHER.
    @Test func aConsumedGrantIsAnsweredDeliveredAndAnyOtherTransactionUndelivered() async throws {
        let rig = try Rig()
        try await rig.grant("900", transactionId: "2000000000000900")
        try await rig.grant("902", transactionId: "2000000000000902", state: .granted)
        try await rig.request("ask-1", transactionId: "2000000000000900")
        try await rig.request("ask-2", transactionId: "2000000000000901")
        try await rig.request("ask-3", transactionId: "2000000000000902")
        let pass = await rig.answerer.answerOnce()
        #expect(pass.answered == 3)
        let sent = Dictionary(uniqueKeysWithValues: rig.sent.map { ($0.0, $0.1) })
        #expect(sent["2000000000000900"]?.deliveryStatus == "DELIVERED")
        #expect(sent["2000000000000901"]?.deliveryStatus == "UNDELIVERED_OTHER")
        #expect(sent["2000000000000902"]?.deliveryStatus == "UNDELIVERED_OTHER")
        #expect(sent["2000000000000900"]?.customerConsented == true)
        #expect(sent["2000000000000900"]?.sampleContentProvided == true)
        #expect(sent["2000000000000900"]?.refundPreference == "DECLINE")
        let answer = try #require(try await rig.harness.ledger.consumptionAnswer(notificationId: "ask-1"))
        #expect(answer.state == .answered && answer.deliveryStatus == "DELIVERED" && answer.attempts == 1)
        #expect(answer.answeredAt == rig.harness.clock.now)
        rig.harness.clock.advance(by: .seconds(3_600))
        #expect(await rig.answerer.answerOnce() == ConsumptionAnswerer.Pass(), "answered once")
        #expect(rig.sent.count == 3)
        #expect(rig.harness.metrics.values.consumptionDeadline == ConsumptionAnswerer.nothingPending)
    }

    @Test func aFailedAnswerIsTriedAgainAfterItsBackoffUntilTheDeadline() async throws {
        let rig = try Rig()
        try await rig.request("ask-3", transactionId: "2000000000000903", minutesAgo: 11 * 60)
        rig.appStore.consumption.withLock {
            $0.failures = [AppStoreError(.unavailable, httpStatus: 503, "down")]
        }
        let first = await rig.answerer.answerOnce()
        #expect(first.retried == 1)
        let pending = try #require(try await rig.harness.ledger.consumptionAnswer(notificationId: "ask-3"))
        #expect(pending.state == .pending && pending.attempts == 1 && pending.lastError?.contains("503") == true)
        let left = try #require(rig.harness.metrics.values.consumptionDeadline)
        #expect(abs(left - 3_600) < 1, "an hour left of the twelve")
        rig.harness.clock.advance(by: .seconds(30))
        #expect(await rig.answerer.answerOnce() == ConsumptionAnswerer.Pass(), "not due before its backoff")
        let later = try #require(rig.harness.metrics.values.consumptionDeadline)
        #expect(abs(later - 3_570) < 1, "a pass with nothing due still reports the deadline waiting")
        rig.harness.clock.advance(by: .seconds(31))
        #expect(await rig.answerer.answerOnce().answered == 1)
        #expect(try await rig.harness.ledger.consumptionAnswer(notificationId: "ask-3")?.attempts == 2)
    }

    @Test func aRequestPastItsDeadlineIsLeftAndOneRefusedAsItIsIsGivenUp() async throws {
        let rig = try Rig()
        try await rig.request("late", transactionId: "2000000000000904", minutesAgo: 12 * 60 + 1)
        try await rig.request("refused", transactionId: "2000000000000905")
        rig.appStore.consumption.withLock {
            $0.failures = [AppStoreError(.invalidRequest, httpStatus: 400, appleErrorCode: 4_000_129, "refused")]
        }
        let pass = await rig.answerer.answerOnce()
        #expect(pass.gaveUp == 1)
        #expect(rig.sent.isEmpty, "nothing sent past the deadline")
        #expect(try await rig.harness.ledger.consumptionAnswer(notificationId: "late") == nil, "never claimed")
        #expect(try await rig.harness.ledger.consumptionAnswer(notificationId: "refused")?.state == .gaveUp)
        #expect(rig.harness.metrics.values.consumptionAnswers == ["gave_up": 1])
        rig.harness.clock.advance(by: .seconds(3_600))
        #expect(await rig.answerer.answerOnce() == ConsumptionAnswerer.Pass())
    }

    @Test func aFailureAMinuteBeforeTheDeadlineIsTriedOnceMoreBeforeIt() async throws {
        let rig = try Rig()
        try await rig.request("last-minute", transactionId: "2000000000000907", minutesAgo: 12 * 60 - 1)
        rig.appStore.consumption.withLock { $0.failures = [AppStoreError(.unavailable, httpStatus: 503, "down")] }
        #expect(await rig.answerer.answerOnce().retried == 1)
        let pending = try #require(try await rig.harness.ledger.consumptionAnswer(notificationId: "last-minute"))
        #expect(pending.nextAttemptAt == rig.harness.clock.now.addingTimeInterval(15))
        rig.harness.clock.advance(by: .seconds(15))
        #expect(await rig.answerer.answerOnce().answered == 1)
    }

    @Test func oneInstanceAnswersARequest() async throws {
        let rig = try Rig()
        try await rig.request("ask-6", transactionId: "2000000000000906")
        rig.appStore.consumption.withLock { $0.failures = [AppStoreError(.unavailable, "down")] }
        let other = Rig.answerer(rig.harness, rig.appStore)
        #expect(await rig.answerer.answerOnce().retried == 1)
        #expect(await other.answerOnce() == ConsumptionAnswerer.Pass(), "its backoff holds it for a minute")
        rig.harness.clock.advance(by: .seconds(61))
        async let a = rig.answerer.answerOnce()
        async let b = other.answerOnce()
        let (first, second) = await (a, b)
        #expect(first.answered + second.answered == 1)
        #expect(rig.sent.count == 1)
    }
}

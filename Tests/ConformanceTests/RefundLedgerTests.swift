import Foundation
import Fulfilment
import GRDB
import IAPTestSupport
import Ledger
import PostgresNIO
import Testing

/// The refunds role on every ledger: a notification recorded once, one revocation per grant with its event, a refund
/// kept before the grant turning the grant into `refunded`, reversals, and the race between a refund and its grant.
@Suite("Refunds on SQLite, PostgreSQL and memory", .timeLimit(.minutes(2)))
struct RefundLedgerTests {
    typealias T = LedgerStoreTests
    static let events = EventFactory(groupID: "g", itemGrantedTopic: "granted", consumeFailedTopic: "failed")
    static let now = Date(timeIntervalSince1970: 1_764_000_000.123)
    static let earlier = now.addingTimeInterval(-60)

    static func notification(
        _ id: String, paymentId: String?, kind: StoreNotification.Kind = .refund, store: Store = .google,
        reason: String? = "REFUND_TYPE_FULL_REFUND", quantity: Int? = nil
    ) -> StoreNotificationRecord {
        StoreNotificationRecord(
            notification: StoreNotification(
                store: store, kind: kind, storeType: "voidedPurchaseNotification", notificationId: id,
                authenticity: .trustedChannel, deliveryId: "m-\(id)", paymentId: paymentId,
                purchaseTokenHash: "hash", application: "com.example.game", productId: "gems", reason: reason,
                quantity: quantity, occurredAt: Date(timeIntervalSince1970: 1_763_990_000.456)),
            channel: .googleRTDN, receivedAt: now)
    }

    @Test(arguments: LedgerBackend.allCases)
    func aRefundOfAGrantRevokesItOnceWithOneEvent(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            _ = try await store.insertGrant(
                T.grant("r1"), event: T.event("r1:item-granted", seq: "r1", at: Self.earlier))
            let first = try await store.record(
                Self.notification("n1", paymentId: "GPA.r1"), events: Self.events, now: Self.now)
            #expect(first.outcome == .revoked && !first.duplicate && first.paymentSeq == "r1")
            #expect(first.events.map(\.id) == ["r1:item-revoked"])
            #expect(first.events.first?.topic == "iap.item-revoked")

            // The same notification again, and another notification of the same refund: nothing new.
            let again = try await store.record(
                Self.notification("n1", paymentId: "GPA.r1"), events: Self.events, now: Self.now)
            #expect(again.duplicate && again.outcome == .revoked && again.events.isEmpty)
            let other = try await store.record(
                Self.notification("n2", paymentId: "GPA.r1"), events: Self.events, now: Self.now)
            #expect(!other.duplicate && other.outcome == .alreadyRefunded && other.events.isEmpty)

            #expect(try await store.events(paymentSeq: "r1").map(\.id) == ["r1:item-granted", "r1:item-revoked"])
            let revocation = try #require(try await store.revocation(paymentSeq: "r1"))
            #expect(revocation.notificationId == "n1" && revocation.userId == "user-1" && revocation.store == .google)
            #expect(revocation.reason == "refund" && revocation.storeReason == "REFUND_TYPE_FULL_REFUND")
            #expect(revocation.revokedAt == Date(epochMilliseconds: 1_763_990_000_456))
            #expect(revocation.reversedBy == nil)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aRefundBeforeItsGrantIsKeptAndTheGrantAnsweredRefunded(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let kept = try await store.record(
                Self.notification("early", paymentId: "GPA.p1"), events: Self.events, now: Self.now)
            #expect(kept.outcome == .pending && kept.paymentSeq == nil && kept.events.isEmpty)
            // Another store's payment with the same id is another payment.
            _ = try await store.insertGrant(
                {
                    var grant = T.grant("apple-p1")
                    grant.marketId = "AS"
                    grant.paymentId = "GPA.p1"
                    return grant
                }(), event: T.event("apple-p1:item-granted", seq: "apple-p1"))

            let results = try await store.insertGrants([
                GrantWrite(grant: T.grant("p1"), event: T.event("p1:item-granted", seq: "p1")),
                GrantWrite(grant: T.grant("p2"), event: T.event("p2:item-granted", seq: "p2")),
            ])
            #expect(results == [.refunded(notificationId: "early"), .inserted])
            #expect(try await store.grant(paymentSeq: "p1") == nil)
            #expect(try await store.events(paymentSeq: "p1").isEmpty)
            #expect(try await store.grant(paymentSeq: "apple-p1") != nil)

            // A reversal before any grant cancels the refund: the purchase may be granted.
            let reversal = try await store.record(
                Self.notification("back", paymentId: "GPA.p1", kind: .refundReversed), events: Self.events,
                now: Self.now)
            #expect(reversal.outcome == .reversed && reversal.events.isEmpty)
            #expect(try await store.notification(id: "early")?.outcome == .reversed)
            #expect(
                try await store.insertGrant(T.grant("p1"), event: T.event("p1:item-granted", seq: "p1")) == .inserted)
        }
    }

    /// Apple's types are read apart: a reversal can be read before its refund. The refund it undid, when it comes,
    /// takes nothing back (before or after the grant); a refund after that reversal revokes as any other.
    @Test(arguments: LedgerBackend.allCases)
    func aReversalReadBeforeItsRefundKeepsThatRefundFromRevoking(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            func at(_ record: StoreNotificationRecord, _ offset: TimeInterval) -> StoreNotificationRecord {
                var record = record
                record.notification.occurredAt = record.notification.occurredAt.addingTimeInterval(offset)
                return record
            }
            _ = try await store.insertGrant(
                T.grant("w1"), event: T.event("w1:item-granted", seq: "w1", at: Self.earlier))
            let early = try await store.record(
                at(Self.notification("rev-w1", paymentId: "GPA.w1", kind: .refundReversed), 3_600), events: Self.events,
                now: Self.now)
            #expect(early.outcome == .unmatched)
            let undone = try await store.record(
                Self.notification("ref-w1", paymentId: "GPA.w1"), events: Self.events, now: Self.now)
            #expect(undone.outcome == .reversed && undone.events.isEmpty)
            #expect(try await store.revocation(paymentSeq: "w1") == nil)
            let later = try await store.record(
                at(Self.notification("ref-w1-again", paymentId: "GPA.w1"), 7_200), events: Self.events, now: Self.now)
            #expect(later.outcome == .revoked && later.events.map(\.id) == ["w1:item-revoked"])

            // Before any grant: the undone refund is not kept pending, and the purchase is granted when it comes.
            _ = try await store.record(
                at(Self.notification("rev-w2", paymentId: "GPA.w2", kind: .refundReversed), 3_600), events: Self.events,
                now: Self.now)
            let before = try await store.record(
                Self.notification("ref-w2", paymentId: "GPA.w2"), events: Self.events, now: Self.now)
            #expect(before.outcome == .reversed)
            let granted = try await store.insertGrant(
                T.grant("w2"), event: T.event("w2:item-granted", seq: "w2", at: Self.earlier))
            #expect(granted == .inserted)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aRefusalKeepsWhereItLastCameFrom(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            func refusal(_ source: String?, at seconds: TimeInterval) -> RefusedNotification {
                RefusedNotification(
                    body: Array("forged".utf8),
                    refusal: NotificationRefusal(store: .google, code: "unverified", detail: "no"),
                    receivedAt: Self.now.addingTimeInterval(seconds), source: source)
            }
            try await store.recordRefusal(refusal("store.notifications[1]@7", at: 0))
            try await store.recordRefusal(refusal("store.notifications[1]@9", at: 1))
            // An older instance's repeat names no source: the one kept stays.
            try await store.recordRefusal(refusal(nil, at: 2))
            let kept = try #require(try await store.refusals(limit: 10).first)
            #expect(kept.count == 3 && kept.source == "store.notifications[1]@9")
            #expect(kept.lastReceivedAt.epochMilliseconds == Self.now.addingTimeInterval(2).epochMilliseconds)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aReversalUndoesTheRevocationOnce(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            _ = try await store.insertGrant(
                T.grant("v1"), event: T.event("v1:item-granted", seq: "v1", at: Self.earlier))
            _ = try await store.record(
                Self.notification("refund", paymentId: "GPA.v1"), events: Self.events, now: Self.now)
            let reversed = try await store.record(
                Self.notification("reversal", paymentId: "GPA.v1", kind: .refundReversed), events: Self.events,
                now: Self.now)
            #expect(reversed.outcome == .reversed && reversed.paymentSeq == "v1")
            #expect(reversed.events.map(\.id) == ["v1:refund-reversed"])
            let again = try await store.record(
                Self.notification("reversal-2", paymentId: "GPA.v1", kind: .refundReversed), events: Self.events,
                now: Self.now)
            #expect(again.outcome == .unmatched && again.events.isEmpty)
            let revocation = try #require(try await store.revocation(paymentSeq: "v1"))
            #expect(revocation.reversedBy == "reversal")
            #expect(revocation.reversedAt == Date(epochMilliseconds: 1_763_990_000_456))
            #expect(
                try await store.events(paymentSeq: "v1").map(\.id)
                    == ["v1:item-granted", "v1:item-revoked", "v1:refund-reversed"])
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func notificationsAreKeptAsTheyCameAndFoundByTheirPayment(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let partial = Self.notification(
                "part", paymentId: "GPA.k1", reason: "REFUND_TYPE_QUANTITY_BASED_PARTIAL_REFUND", quantity: Int.max)
            _ = try await store.insertGrant(T.grant("k1"), event: T.event("k1:item-granted", seq: "k1"))
            _ = try await store.record(partial, events: Self.events, now: Self.now)
            _ = try await store.record(
                Self.notification("declined", paymentId: "GPA.k1", kind: .refundDeclined, store: .google),
                events: Self.events, now: Self.now)
            let other = try await store.record(
                Self.notification("test", paymentId: nil, kind: .other), events: Self.events, now: Self.now)
            #expect(other.outcome == .recorded)
            let unpaid = try await store.record(
                Self.notification("no-payment", paymentId: nil), events: Self.events, now: Self.now)
            #expect(unpaid.outcome == .unmatched)

            var expected = partial
            expected.outcome = .revoked
            expected.paymentSeq = "k1"
            expected.receivedAt = Date(epochMilliseconds: Self.now.epochMilliseconds)
            expected.notification.occurredAt = Date(epochMilliseconds: 1_763_990_000_456)
            #expect(try await store.notification(id: "part") == expected)
            let found = try await store.notifications(paymentKey: StorePaymentKey(marketId: "GG", paymentId: "GPA.k1"))
            #expect(found.map(\.notification.notificationId) == ["declined", "part"])
            #expect(found.map(\.outcome) == [.recorded, .revoked])
            let revocation = try #require(try await store.revocation(paymentSeq: "k1"))
            #expect(revocation.reason == "partial_refund" && revocation.quantity == Int.max)
            #expect(try await store.notification(id: "missing") == nil)
        }
    }

    /// A history position is held by one owner at a time until its lease runs out; only its holder saves it.
    @Test(arguments: LedgerBackend.allCases)
    func aHistoryPositionHasOneHolderAtATime(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let t0 = Self.now
            let mark = try #require(
                try await store.claimHistoryPoll(name: "apple:REFUND", owner: "a", until: t0 + 600, now: t0))
            #expect(mark == HistoryPollMark(name: "apple:REFUND"))
            #expect(
                try await store.claimHistoryPoll(name: "apple:REFUND", owner: "b", until: t0 + 700, now: t0 + 10) == nil
            )
            var saved = mark
            saved.windowStart = t0 - 86_400
            saved.windowEnd = t0
            saved.paginationToken = "page-2"
            #expect(try await store.saveHistoryPoll(saved, owner: "a", leaseUntil: t0 + 600))
            #expect(
                try await store.saveHistoryPoll(saved, owner: "b", leaseUntil: t0 + 600) == false, "b holds no lease")
            // a renews; then its lease runs out and b takes the position over, as a saved it.
            #expect(
                try await store.claimHistoryPoll(name: "apple:REFUND", owner: "a", until: t0 + 900, now: t0 + 20) != nil
            )
            #expect(
                try await store.claimHistoryPoll(name: "apple:REFUND", owner: "b", until: t0 + 1_500, now: t0 + 800)
                    == nil)
            let taken = try await store.claimHistoryPoll(
                name: "apple:REFUND", owner: "b", until: t0 + 1_500, now: t0 + 901)
            #expect(taken?.paginationToken == "page-2")
            #expect(taken?.windowStart == Date(epochMilliseconds: (t0 - 86_400).epochMilliseconds))
            #expect(try await store.saveHistoryPoll(saved, owner: "a", leaseUntil: t0 + 2_000) == false, "a lost it")
            #expect(try await store.historyPolls().map(\.name) == ["apple:REFUND"])
        }
    }

    /// A lease taken before the wall clock stepped back an hour ends with its length, not an hour later: its end lies
    /// further ahead than any lease reaches.
    @Test(arguments: LedgerBackend.allCases)
    func aHistoryLeaseTakenBeforeTheClockSteppedBackEndsWithItsLength(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let t0 = Self.now
            let first = try await store.claimHistoryPoll(name: "apple:REFUND", owner: "a", until: t0 + 120, now: t0)
            #expect(first != nil)
            let back = t0 - 3_600
            #expect(
                try await store.claimHistoryPoll(name: "apple:REFUND", owner: "b", until: back + 120, now: back) != nil)
            #expect(
                try await store.claimHistoryPoll(name: "apple:REFUND", owner: "c", until: back + 130, now: back + 10)
                    == nil, "a lease within its length still holds")
        }
    }

    /// A pass that reads on renews its lease with each page saved; one that read its window to the end gives the lease
    /// up, so another instance (or this one restarted under a new name) takes the next pass at once.
    @Test(arguments: LedgerBackend.allCases)
    func aWindowReadToItsEndGivesItsLeaseUp(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let t0 = Self.now
            var mark = try #require(
                try await store.claimHistoryPoll(name: "apple:REFUND", owner: "a", until: t0 + 60, now: t0))
            mark.windowStart = t0 - 86_400
            mark.windowEnd = t0
            mark.paginationToken = "page-2"
            // A page read on: the lease now runs to t0 + 200, past the claim's t0 + 60.
            #expect(try await store.saveHistoryPoll(mark, owner: "a", leaseUntil: t0 + 200))
            #expect(
                try await store.claimHistoryPoll(name: "apple:REFUND", owner: "b", until: t0 + 300, now: t0 + 100)
                    == nil)
            // The window read to its end: the lease is given up with the position saved.
            mark.paginationToken = nil
            mark.lastSuccess = t0 + 110
            #expect(try await store.saveHistoryPoll(mark, owner: "a", leaseUntil: nil))
            let taken = try await store.claimHistoryPoll(
                name: "apple:REFUND", owner: "b", until: t0 + 300, now: t0 + 111)
            #expect(taken?.lastSuccess == Date(epochMilliseconds: (t0 + 110).epochMilliseconds))
            #expect(taken?.paginationToken == nil)
            #expect(try await store.saveHistoryPoll(mark, owner: "a", leaseUntil: nil) == false, "b holds it now")
        }
    }

    /// A consumption request is claimed by one caller at a time, again once its next attempt is due, never once
    /// answered; its deadline is 12 hours after Apple asked.
    @Test(arguments: LedgerBackend.allCases)
    func aConsumptionRequestIsClaimedOnceAtATimeUntilAnswered(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            var ask = Self.notification("ask", paymentId: "2000000000000001", kind: .consumptionRequest, store: .apple)
            ask.notification.storeType = "CONSUMPTION_REQUEST"
            _ = try await store.record(ask, events: Self.events, now: Self.now)
            // A refund of the same transaction is no request.
            _ = try await store.record(
                Self.notification("refund", paymentId: "2000000000000001", store: .apple), events: Self.events,
                now: Self.now)
            let t0 = Self.now
            let deadline = Date(epochMilliseconds: 1_763_990_000_456 + 43_200_000)
            #expect(try await store.nearestConsumptionDeadline(now: t0) == deadline)
            let claimed = try await store.claimConsumptionRequests(now: t0, until: t0 + 120, limit: 10)
            #expect(claimed.map(\.notificationId) == ["ask"])
            #expect(claimed.first?.transactionId == "2000000000000001")
            #expect(claimed.first?.deadline == deadline)
            #expect(try await store.claimConsumptionRequests(now: t0 + 1, until: t0 + 121, limit: 10).isEmpty)
            let claim = try #require(claimed.first)

            let retry = ConsumptionAnswer(
                notificationId: "ask", transactionId: "2000000000000001", state: .pending, deliveryStatus: "DELIVERED",
                attempts: 1, lastError: "HTTP 503", nextAttemptAt: t0 + 60)
            #expect(try await store.recordConsumptionAnswer(retry, claim: claim))
            #expect(try await store.claimConsumptionRequests(now: t0 + 30, until: t0 + 150, limit: 10).isEmpty)
            // The claim lapsed and was taken again: an answer under the old claim is not recorded.
            let again = try #require(
                try await store.claimConsumptionRequests(now: t0 + 61, until: t0 + 181, limit: 10).first)
            #expect(again.attempts == 1)
            var late = retry
            late.state = .gaveUp
            #expect(try await store.recordConsumptionAnswer(late, claim: claim) == false)
            let answered = ConsumptionAnswer(
                notificationId: "ask", transactionId: "2000000000000001", state: .answered, deliveryStatus: "DELIVERED",
                attempts: 2, answeredAt: t0 + 62)
            #expect(try await store.recordConsumptionAnswer(answered, claim: again))
            #expect(try await store.recordConsumptionAnswer(late, claim: again) == false, "an answer is final")
            #expect(try await store.claimConsumptionRequests(now: t0 + 3_600, until: t0 + 3_720, limit: 10).isEmpty)
            #expect(try await store.nearestConsumptionDeadline(now: t0 + 3_600) == nil)
            let answer = try #require(try await store.consumptionAnswer(notificationId: "ask"))
            #expect(answer.state == .answered && answer.attempts == 2 && answer.deliveryStatus == "DELIVERED")
            #expect(answer.answeredAt == Date(epochMilliseconds: (t0 + 62).epochMilliseconds))
            // A request past its deadline is never claimed.
            var old = Self.notification("old", paymentId: "2000000000000002", kind: .consumptionRequest, store: .apple)
            old.notification.occurredAt = t0 - 43_201
            _ = try await store.record(old, events: Self.events, now: Self.now)
            #expect(try await store.claimConsumptionRequests(now: t0, until: t0 + 120, limit: 10).isEmpty)
            #expect(try await store.consumptionAnswer(notificationId: "refund") == nil)
        }
    }

    /// A refund and the grant of its payment at the same moment: whichever commits first, the other sees it — a
    /// revoked grant, or a refunded purchase; never a grant beside a refund still pending.
    @Test(arguments: LedgerBackend.allCases)
    func aRefundRacingItsGrantIsSeenByOneSide(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend, maxConnections: 40) { store in
            let count = 60
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<count {
                    group.addTask {
                        _ = try await store.insertGrant(
                            T.grant("race-\(i)"), event: T.event("race-\(i):item-granted", seq: "race-\(i)"))
                    }
                    group.addTask {
                        _ = try await store.record(
                            Self.notification("race-n\(i)", paymentId: "GPA.race-\(i)"), events: Self.events,
                            now: Self.now)
                    }
                }
                try await group.waitForAll()
            }
            for i in 0..<count {
                let granted = try await store.grant(paymentSeq: "race-\(i)") != nil
                let outcome = try await store.notification(id: "race-n\(i)")?.outcome
                if granted {
                    #expect(outcome == .revoked, "race-\(i): granted, so the refund must have revoked it")
                    #expect(try await store.revocation(paymentSeq: "race-\(i)") != nil)
                } else {
                    #expect(outcome == .pending, "race-\(i): not granted, so the refund must be kept pending")
                }
            }
        }
    }
}

extension RefundLedgerTests {
    /// A grant written beside a pending refund by an instance that does not look for refunds (a version before them):
    /// the sweeper's settlement revokes it, once, under the lock.
    @Test(arguments: LedgerBackend.sql)
    func aRefundPendingBesideAnOldInstancesGrantIsSettledOnce(backend: LedgerBackend) async throws {
        let url = try await TestDatabases.freshLedgerURL(backend)
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { store in
            let kept = try await store.record(
                Self.notification("kept", paymentId: "GPA.o1"), events: Self.events, now: Self.now)
            #expect(kept.outcome == .pending)
            #expect(try await store.settlePendingRefunds(limit: 10, events: Self.events, now: Self.now).isEmpty)
        }
        // The older instance's grant: the row and its event, written as that version writes them.
        let grant = """
            INSERT INTO grants (payment_seq, user_id, gamebase_product_id, purchase_token, market_id, payment_id,
                is_test_purchase, state, granted_at_ms)
            VALUES ('o1', 'user-1', 'gems', 'tok', 'GG', 'GPA.o1', \(backend == .sqlite ? "0" : "false"), 'consumed', 0)
            """
        try await Self.execute(grant, on: url, backend: backend)
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { store in
            let settled = try await store.settlePendingRefunds(limit: 10, events: Self.events, now: Self.now)
            #expect(settled.map(\.outcome) == [.revoked])
            #expect(settled.first?.events.map(\.id) == ["o1:item-revoked"])
            #expect(try await store.notification(id: "kept")?.outcome == .revoked)
            #expect(try await store.notification(id: "kept")?.paymentSeq == "o1")
            #expect(try await store.revocation(paymentSeq: "o1")?.notificationId == "kept")
            #expect(try await store.settlePendingRefunds(limit: 10, events: Self.events, now: Self.now).isEmpty)
        }
    }

    /// A pending refund a newer version wrote with a kind this one does not know is left to that version: the
    /// settlement goes on with the others instead of failing on it at every sweep.
    @Test(arguments: LedgerBackend.sql)
    func aPendingRefundThisVersionCannotReadDoesNotHoldUpTheOthers(backend: LedgerBackend) async throws {
        let url = try await TestDatabases.freshLedgerURL(backend)
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { store in
            for (id, payment) in [("a-newer", "GPA.n1"), ("b-kept", "GPA.n2")] {
                let kept = try await store.record(
                    Self.notification(id, paymentId: payment), events: Self.events, now: Self.now)
                #expect(kept.outcome == .pending)
            }
        }
        let bool = backend == .sqlite ? "0" : "false"
        try await Self.execute(
            "UPDATE store_notifications SET kind = 'refund_of_a_newer_kind' WHERE notification_id = 'a-newer'", on: url,
            backend: backend)
        try await Self.execute(
            """
            INSERT INTO grants (payment_seq, user_id, gamebase_product_id, purchase_token, market_id, payment_id,
                is_test_purchase, state, granted_at_ms)
            VALUES ('n1', 'user-1', 'gems', 'tok1', 'GG', 'GPA.n1', \(bool), 'consumed', 0),
                   ('n2', 'user-2', 'gems', 'tok2', 'GG', 'GPA.n2', \(bool), 'consumed', 0)
            """, on: url, backend: backend)
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { store in
            let settled = try await store.settlePendingRefunds(limit: 10, events: Self.events, now: Self.now)
            #expect(settled.map(\.paymentSeq) == ["n2"])
            #expect(try await store.revocation(paymentSeq: "n1") == nil)
            #expect(try await store.settlePendingRefunds(limit: 10, events: Self.events, now: Self.now).isEmpty)
        }
    }

    static func execute(_ sql: String, on url: String, backend: LedgerBackend) async throws {
        switch backend {
        case .sqlite:
            let path = String(url.dropFirst("sqlite://".count))
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in try db.execute(sql: sql) }
        case .postgres:
            let server = try PostgresTestServer.current()
            let database = String(url.split(separator: "/").last!.split(separator: "?").first!)
            _ = try await server.withConnection(to: database) { connection in
                try await connection.query(PostgresQuery(unsafeSQL: sql), logger: TestDatabases.quietLogger)
            }
        case .memory:
            throw TestSetupError(message: "the memory ledger runs no SQL")
        }
    }
}

/// PostgreSQL's read committed lets a grant and a refund of one payment each miss the other (each checks what the
/// other has not committed yet); the payment's advisory lock orders them. Each test holds the lock in a transaction of
/// its own, writes there what the other path would have written, and commits only after the path under test started:
/// the path must wait for the lock and then see the row.
@Suite("Refund and grant ordered by the payment's lock on PostgreSQL", .timeLimit(.minutes(1)))
struct RefundLockTests {
    typealias T = LedgerStoreTests

    static func holdingTheLock<Result: Sendable>(
        of paymentId: String, writing statement: PostgresQuery,
        _ path: @escaping @Sendable (any SQLLedgerStore) async throws -> Result
    ) async throws -> Result {
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        let url = server.url(database: database)
        let logger = TestDatabases.quietLogger
        return try await LedgerStores.withStore(url: url, logger: logger) { store in
            try await server.withConnection(to: database) { connection in
                try await connection.query("BEGIN", logger: logger)
                try await connection.query(
                    "SELECT pg_advisory_xact_lock(\(Int32(0x1A9)), hashtext('GG:' || \(paymentId)::text))",
                    logger: logger)
                try await connection.query(statement, logger: logger)
                let running = Task { try await path(store) }
                try await Task.sleep(for: .milliseconds(400))
                try await connection.query("COMMIT", logger: logger)
                return try await running.value
            }
        }
    }

    @Test func aGrantWaitsForARefundBeingRecordedAndIsRefused() async throws {
        let result = try await Self.holdingTheLock(
            of: "GPA.w1",
            writing: """
                INSERT INTO store_notifications (notification_id, store, market_id, kind, store_type, authenticity,
                    channel, payment_id, occurred_at_ms, received_at_ms, outcome)
                VALUES ('held', 'google', 'GG', 'refund', 'voidedPurchaseNotification', 'trusted_channel',
                    'google-rtdn', 'GPA.w1', 0, 0, 'pending')
                """
        ) { store in
            try await store.insertGrant(T.grant("w1"), event: T.event("w1:item-granted", seq: "w1"))
        }
        #expect(result == .refunded(notificationId: "held"))
    }

    @Test func aRefundWaitsForAGrantBeingWrittenAndRevokesIt() async throws {
        let result = try await Self.holdingTheLock(
            of: "GPA.w2",
            writing: """
                INSERT INTO grants (payment_seq, user_id, gamebase_product_id, purchase_token, market_id, payment_id,
                    is_test_purchase, state, granted_at_ms)
                VALUES ('w2', 'user-1', 'gems', 'tok', 'GG', 'GPA.w2', false, 'granted', 0)
                """
        ) { store in
            try await store.record(
                RefundLedgerTests.notification("held", paymentId: "GPA.w2"), events: RefundLedgerTests.events,
                now: RefundLedgerTests.now)
        }
        #expect(result.outcome == .revoked && result.paymentSeq == "w2")
    }
}

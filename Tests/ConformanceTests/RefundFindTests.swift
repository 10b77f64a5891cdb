import Foundation
import Fulfilment
import IAPTestSupport
import InMemoryLedger
import Ledger
import Lookup
import Testing

/// `find` tells a purchase's refunds in its timeline, finds a refund by its notification id, and a refund of a payment
/// the ledger never saw by its store payment id.
@Suite("find and refunds on SQLite, PostgreSQL and memory", .timeLimit(.minutes(2)))
struct RefundFindTests {
    typealias R = RefundLedgerTests

    @Test(arguments: LedgerBackend.allCases)
    func aRefundIsInItsPurchasesTimelineAndFoundByItsIds(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            _ = try await store.insertGrant(
                LedgerStoreTests.grant("f1", at: R.earlier),
                event: LedgerStoreTests.event("f1:item-granted", seq: "f1", at: R.earlier))
            _ = try await store.record(R.notification("n-f1", paymentId: "GPA.f1"), events: R.events, now: R.now)
            _ = try await store.record(R.notification("n-never", paymentId: "GPA.never"), events: R.events, now: R.now)
            let finder = PurchaseFinder(reader: store, refunds: store)

            let byGrant = try await finder.find("f1")
            let timeline = try #require(byGrant.purchases.first)
            #expect(timeline.status == "granted, Consume pending (0 failed attempts); revoked (refunded)")
            #expect(timeline.entries.contains { $0.kind == .refund && $0.fields["notification_id"] == "n-f1" })
            #expect(timeline.entries.contains { $0.kind == .revocation && $0.origin == .ledger })
            #expect(timeline.entries.contains { $0.fields.values.contains("f1:item-revoked") })

            let byNotification = try await finder.find("n-f1")
            #expect(byNotification.kind == .notificationId)
            #expect(byNotification.purchases.map(\.paymentSeq) == ["f1"])

            let never = try await finder.find("GPA.never")
            #expect(never.kind == .paymentId)
            #expect(never.purchases.count == 1)
            #expect(never.purchases.first?.paymentSeq == nil)
            #expect(
                never.purchases.first?.status == "refunded by the store; no purchase in the ledger (pending refund)")
            #expect(try await finder.find("n-never").purchases.first?.paymentId == "GPA.never")
            // The token is never shown, only its short hash.
            let text = FindTextRenderer.render(byGrant)
            #expect(!text.contains("tok-f1"))
        }
    }

    /// A record refused as not believed (a forged signature, another app) is found by the notification id it claims,
    /// with why, how often and where it last came from — on every ledger; nothing else claims that id.
    @Test(arguments: LedgerBackend.allCases)
    func aRefusedNotificationIsFoundByTheIdItClaims(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            for (body, source) in [("forged-1", "store.notifications[0]@4"), ("forged-1", "store.notifications[2]@9")] {
                try await store.recordRefusal(
                    RefusedNotification(
                        body: Array(body.utf8),
                        refusal: NotificationRefusal(
                            store: .apple, code: "unverified", detail: "the chain does not verify",
                            claimedId: "3f1c2a9e-0b1d-4c2e-9f00-112233445566"),
                        receivedAt: R.now, source: source))
            }
            try await store.recordRefusal(
                RefusedNotification(
                    body: Array("other".utf8),
                    refusal: NotificationRefusal(store: .google, code: "malformed", detail: "not JSON"),
                    receivedAt: R.now, source: nil))
            let finder = PurchaseFinder(reader: store, refunds: store)
            let found = try await finder.find("3f1c2a9e-0b1d-4c2e-9f00-112233445566")
            #expect(found.kind == .notificationId)
            let refused = try #require(found.purchases.first)
            #expect(found.purchases.count == 1 && refused.paymentSeq == nil)
            #expect(
                refused.status
                    == "refused apple notification (unverified), its id only claimed: nothing revoked or recorded")
            #expect(refused.entries.map(\.kind) == [.refusal, .refusal])
            #expect(refused.entries.last?.fields["source"] == "store.notifications[2]@9")
            #expect(refused.entries.first?.fields["count"] == "2")
            #expect(try await finder.find("00000000-0000-0000-0000-000000000000").purchases.isEmpty)
            let text = FindTextRenderer.render(found)
            #expect(text.contains("never believed") && text.contains("store.notifications[2]@9"), "\(text)")
        }
    }

    /// A ledger an older version migrated (no refund tables) still tells a purchase's own story; a refund read that
    /// fails otherwise (the ledger down, a deadline) fails the find rather than leave the refund out unsaid.
    @Test(arguments: LedgerBackend.sql)
    func aLedgerWithoutRefundTablesIsReadWithoutRefundsAndAnyOtherFailureFailsTheFind(backend: LedgerBackend)
        async throws
    {
        let url = try await TestDatabases.freshLedgerURL(backend)
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { store in
            _ = try await store.insertGrant(
                LedgerStoreTests.grant("m1", at: R.earlier),
                event: LedgerStoreTests.event("m1:item-granted", seq: "m1", at: R.earlier))
        }
        for table in ["revocations", "consumption_answers", "store_notifications"] {
            try await RefundLedgerTests.execute("DROP TABLE \(table)", on: url, backend: backend)
        }
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger, migrate: false) { store in
            let found = try await PurchaseFinder(reader: store, refunds: store).find("m1")
            #expect(found.purchases.first?.status.hasPrefix("granted") == true)
        }
        let failing = FailingRefunds(error: LedgerError(code: .query, message: "connection reset"))
        let memory = MemoryLedger()
        _ = try await memory.insertGrant(
            LedgerStoreTests.grant("m2", at: R.earlier),
            event: LedgerStoreTests.event("m2:item-granted", seq: "m2", at: R.earlier))
        await #expect(throws: LedgerError.self) {
            try await PurchaseFinder(reader: memory, refunds: failing).find("m2")
        }
    }

    /// A refunds role whose every read fails with `error`.
    struct FailingRefunds: RefundHistoryLedger {
        let error: LedgerError
        func notifications(paymentKey: StorePaymentKey) async throws -> [StoreNotificationRecord] { throw error }
        func notification(id: String) async throws -> StoreNotificationRecord? { throw error }
        func revocations(paymentSeq: String) async throws -> [RevocationRecord] { throw error }
        func consumptionAnswer(notificationId: String) async throws -> ConsumptionAnswer? { throw error }
        func latestRefunds(limit: Int) async throws -> [RefundListing] { throw error }
        func refundCounts(since: Date) async throws -> [RefundDayCount] { throw error }
        func refundingUsers(since: Date, limit: Int) async throws -> [RefundingUser] { throw error }
        func refusals(limit: Int) async throws -> [RefusedNotification] { throw error }
        func refusals(claimedId: String, limit: Int) async throws -> [RefusedNotification] { throw error }
    }
}

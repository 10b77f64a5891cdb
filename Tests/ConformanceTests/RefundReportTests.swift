import Foundation
import Fulfilment
import IAPTestSupport
import Testing

/// The console's refunds page reads the same on every ledger: the latest refund notifications with their grant's user,
/// counts per UTC day by what each did, and the users with the most revocations in a window.
@Suite("Refund reports on SQLite, PostgreSQL and memory", .timeLimit(.minutes(2)))
struct RefundReportTests {
    typealias R = RefundLedgerTests
    typealias T = LedgerStoreTests
    static let day: TimeInterval = 86_400

    static func received(
        _ id: String, paymentId: String?, kind: StoreNotification.Kind = .refund, at: Date
    ) -> StoreNotificationRecord {
        var record = R.notification(id, paymentId: paymentId, kind: kind)
        record.receivedAt = at
        return record
    }

    @Test(arguments: LedgerBackend.allCases)
    func theRefundsPageReadsTheLatestTheDaysAndTheUsers(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let now = R.now
            for (seq, user) in [
                ("a1", "ann"), ("a2", "ann"), ("a3", "ann"), ("b1", "bob"), ("z1", "Zed"), ("old", "olga"),
            ] {
                _ = try await store.insertGrant(
                    T.grant(seq, user: user, at: R.earlier), event: T.event("\(seq):item-granted", seq: seq))
            }
            let yesterday = now.addingTimeInterval(-Self.day)
            let longAgo = now.addingTimeInterval(-40 * Self.day)
            // Ann: three refunds revoked, one of them reversed later; Bob: one; a refund before any grant; a declined
            // refund; a subscription's notification (not a refund); a refund 40 days ago (outside the window).
            let recorded: [(StoreNotificationRecord, Date)] = [
                (Self.received("n-a1", paymentId: "GPA.a1", at: yesterday), yesterday),
                (Self.received("n-a2", paymentId: "GPA.a2", at: now), now),
                (Self.received("n-a3", paymentId: "GPA.a3", at: now), now),
                (Self.received("n-b1", paymentId: "GPA.b1", at: yesterday), yesterday),
                // Ids and users that sort differently by bytes than by a language's collation ("Z" before "a").
                (Self.received("n-Z1", paymentId: "GPA.z1", at: now), now),
                (Self.received("n-a3-back", paymentId: "GPA.a3", kind: .refundReversed, at: now), now),
                (Self.received("n-pending", paymentId: "GPA.never", at: now), now),
                (Self.received("n-declined", paymentId: "GPA.b1", kind: .refundDeclined, at: now), now),
                (Self.received("n-other", paymentId: "GPA.a1", kind: .other, at: now), now),
                (Self.received("n-old", paymentId: "GPA.old", at: longAgo), longAgo),
            ]
            for (record, at) in recorded { _ = try await store.record(record, events: R.events, now: at) }

            let latest = try await store.latestRefunds(limit: 100)
            // Latest received first, then by notification id (bytes, descending); the subscription's is no refund.
            #expect(
                latest.map(\.record.notification.notificationId) == [
                    "n-pending", "n-declined", "n-a3-back", "n-a3", "n-a2", "n-Z1", "n-b1", "n-a1", "n-old",
                ])
            #expect(latest.first { $0.record.notification.notificationId == "n-a2" }?.userId == "ann")
            #expect(latest.first { $0.record.notification.notificationId == "n-a2" }?.record.outcome == .revoked)
            #expect(latest.first { $0.record.notification.notificationId == "n-pending" }?.userId == nil)
            #expect(latest.first { $0.record.notification.notificationId == "n-pending" }?.record.outcome == .pending)
            #expect(try await store.latestRefunds(limit: 2).count == 2)

            let since = now.addingTimeInterval(-30 * Self.day)
            let counts = Set(try await store.refundCounts(since: since))
            let today = RefundDayCount.day(ofEpochMilliseconds: now.epochMilliseconds)
            let dayBefore = RefundDayCount.day(ofEpochMilliseconds: yesterday.epochMilliseconds)
            #expect(
                counts == [
                    RefundDayCount(day: dayBefore, kind: .refund, outcome: .revoked, count: 2),
                    RefundDayCount(day: today, kind: .refund, outcome: .revoked, count: 3),
                    RefundDayCount(day: today, kind: .refund, outcome: .pending, count: 1),
                    RefundDayCount(day: today, kind: .refundReversed, outcome: .reversed, count: 1),
                    RefundDayCount(day: today, kind: .refundDeclined, outcome: .recorded, count: 1),
                ])

            let users = try await store.refundingUsers(since: since, limit: 10)
            // Ties by userId's bytes: "Zed" before "bob".
            #expect(users.map(\.userId) == ["ann", "Zed", "bob"])
            #expect(users.first?.revocations == 3 && users.first?.reversed == 1)
            #expect(users.first?.lastRecordedAt == Date(epochMilliseconds: now.epochMilliseconds))
            #expect(try await store.refundingUsers(since: since, limit: 1).map(\.userId) == ["ann"])
            // The window counts by when each revocation was recorded: from 40 days back, Olga's is in.
            let all = try await store.refundingUsers(since: longAgo, limit: 10)
            #expect(all.map(\.userId) == ["ann", "Zed", "bob", "olga"])
        }
    }

    @Test
    func aDayIsTheUTCDayOfItsMilliseconds() {
        #expect(RefundDayCount.day(ofEpochMilliseconds: 86_400_000 * 3 + 5) == Date(timeIntervalSince1970: 86_400 * 3))
        #expect(RefundDayCount.day(ofEpochMilliseconds: 86_400_000 * 3 - 1) == Date(timeIntervalSince1970: 86_400 * 2))
        #expect(RefundDayCount.day(ofEpochMilliseconds: -1) == Date(timeIntervalSince1970: -86_400))
    }
}

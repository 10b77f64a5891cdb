import Foundation
import Fulfilment
import IAPTestSupport
import Ledger
import Testing

/// A grant a refund revoked, whose Consume Gamebase refuses for good, is set aside on every ledger: no longer claimed
/// by the sweeper nor counted as waiting for Consume, counted apart, shown in the history, and taken back by a
/// reversal of the refund. Only a whole refund that stands sets a grant aside.
@Suite("Revoked grants Gamebase will not consume, on SQLite, PostgreSQL and memory", .timeLimit(.minutes(2)))
struct ConsumeSetAsideTests {
    typealias T = LedgerStoreTests
    typealias R = RefundLedgerTests
    static let granted = Date(epochMilliseconds: 1_763_000_000_000)
    static let setAsideAt = Date(epochMilliseconds: 1_764_000_100_000)

    /// What the sweeper claims at `now` (each claim leases for a second: claims a minute apart do not see leases).
    static func claimable(_ store: some SweepLedger, minute: Int) async throws -> [String] {
        try await store.claimUnconsumedGrants(
            grantedBefore: .distantFuture, limit: 100, lease: .seconds(1),
            now: setAsideAt.addingTimeInterval(60 * Double(minute))
        ).map(\.paymentSeq).sorted()
    }

    @Test(arguments: LedgerBackend.allCases)
    func onlyAGrantAWholeRefundRevokesIsSetAsideAndAReversalTakesItBack(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            for (index, seq) in ["whole", "kept", "partial"].enumerated() {
                let at = Self.granted.addingTimeInterval(Double(index))
                _ = try await store.insertGrant(
                    T.grant(seq, at: at), event: T.event("\(seq):item-granted", seq: seq, at: at))
            }
            // Not revoked yet: nothing to set aside.
            #expect(try await !store.setAsideRevokedGrant(paymentSeq: "whole", at: Self.setAsideAt))

            let refund = try await store.record(
                R.notification("refund", paymentId: "GPA.whole"), events: R.events, now: R.now)
            #expect(refund.outcome == .revoked)
            let partial = try await store.record(
                R.notification(
                    "partial", paymentId: "GPA.partial", reason: RevocationRecord.googlePartialRefund, quantity: 1),
                events: R.events, now: R.now)
            #expect(partial.outcome == .revoked)

            #expect(try await store.setAsideRevokedGrant(paymentSeq: "whole", at: Self.setAsideAt))
            // Once; a grant no refund revokes, or only part of, never; nor a grant that does not exist.
            #expect(try await !store.setAsideRevokedGrant(paymentSeq: "whole", at: Self.setAsideAt))
            #expect(try await !store.setAsideRevokedGrant(paymentSeq: "kept", at: Self.setAsideAt))
            #expect(try await !store.setAsideRevokedGrant(paymentSeq: "partial", at: Self.setAsideAt))
            #expect(try await !store.setAsideRevokedGrant(paymentSeq: "missing", at: Self.setAsideAt))

            #expect(try await store.countUnconsumed() == 2)
            #expect(try await store.countSetAside() == 1)
            #expect(try await store.oldestUnconsumedGrantedAt() == Self.granted.addingTimeInterval(1))
            #expect(try await Self.claimable(store, minute: 1) == ["kept", "partial"])
            #expect(try await store.history(paymentSeq: "whole").consumeSetAsideAt == Self.setAsideAt)
            #expect(try await store.history(paymentSeq: "kept").consumeSetAsideAt == nil)

            // The store reverses the refund: the item is the player's again, and Consume is tried again.
            let reversal = try await store.record(
                R.notification("reversal", paymentId: "GPA.whole", kind: .refundReversed), events: R.events,
                now: R.now)
            #expect(reversal.outcome == .reversed)
            #expect(try await store.countSetAside() == 0)
            #expect(try await store.countUnconsumed() == 3)
            #expect(try await store.oldestUnconsumedGrantedAt() == Self.granted)
            #expect(try await Self.claimable(store, minute: 2) == ["kept", "partial", "whole"])
            #expect(try await store.history(paymentSeq: "whole").consumeSetAsideAt == nil)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aSetAsideGrantConsumedAfterAllIsNoLongerCountedApart(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            _ = try await store.insertGrant(
                T.grant("late", at: Self.granted), event: T.event("late:item-granted", seq: "late", at: Self.granted))
            _ = try await store.record(R.notification("refund", paymentId: "GPA.late"), events: R.events, now: R.now)
            #expect(try await store.setAsideRevokedGrant(paymentSeq: "late", at: Self.setAsideAt))
            #expect(try await store.countSetAside() == 1)
            // A duplicate message's Consume that Gamebase takes after all.
            #expect(try await store.markConsumed(paymentSeq: "late", resultCode: 0, at: Self.setAsideAt))
            #expect(try await store.countSetAside() == 0)
            #expect(try await store.countUnconsumed() == 0)
        }
    }

    /// A reversal recorded by an instance of a version before set-asides (or committed while another instance was
    /// setting the grant aside) leaves the grant set aside: the sweeper's backstop takes back every set-aside grant
    /// whose refund no longer stands, and only those.
    @Test(arguments: LedgerBackend.sql)
    func theSweepTakesBackASetAsideGrantWhoseRefundAnOlderInstanceReversed(backend: LedgerBackend) async throws {
        let url = try await TestDatabases.freshLedgerURL(backend)
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { store in
            for seq in ["reversed", "still"] {
                _ = try await store.insertGrant(
                    T.grant(seq, at: Self.granted), event: T.event("\(seq):item-granted", seq: seq, at: Self.granted))
                _ = try await store.record(
                    R.notification("refund-\(seq)", paymentId: "GPA.\(seq)"), events: R.events, now: R.now)
                #expect(try await store.setAsideRevokedGrant(paymentSeq: seq, at: Self.setAsideAt))
            }
            #expect(try await store.resumeSetAsideGrants() == 0, "both refunds stand")
        }
        // The older version's reversal: the revocation marked reversed, nothing else.
        try await R.execute(
            "UPDATE revocations SET reversed_by = 'old-reversal', reversed_at_ms = 1 WHERE payment_seq = 'reversed'",
            on: url, backend: backend)
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { store async throws in
            #expect(try await store.countSetAside() == 2)
            #expect(try await store.resumeSetAsideGrants() == 1)
            #expect(try await store.resumeSetAsideGrants() == 0, "once")
            #expect(try await store.countSetAside() == 1)
            #expect(try await Self.claimable(store, minute: 1) == ["reversed"])
            #expect(try await store.history(paymentSeq: "still").consumeSetAsideAt == Self.setAsideAt)
        }
    }

    /// The new version's `find` and `check-config` read a ledger not migrated to 009 yet (no set-aside column): the
    /// history without a set-aside, and the count of grants waiting said as "not migrated", never a query error.
    @Test(arguments: LedgerBackend.sql)
    func aLedgerNotMigratedToTheSetAsideIsReadAsOneWithoutAny(backend: LedgerBackend) async throws {
        let url = try await TestDatabases.freshLedgerURL(backend)
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { store in
            _ = try await store.insertGrant(
                T.grant("old", at: Self.granted), event: T.event("old:item-granted", seq: "old", at: Self.granted))
        }
        try await R.execute("DROP INDEX grants_consume_set_aside", on: url, backend: backend)
        try await R.execute("DROP INDEX grants_waiting_for_consume", on: url, backend: backend)
        try await R.execute("ALTER TABLE grants DROP COLUMN consume_set_aside_at_ms", on: url, backend: backend)
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger, migrate: false) {
            store async throws in
            let history = try await store.history(paymentSeq: "old")
            #expect(history.grant?.paymentSeq == "old" && history.consumeSetAsideAt == nil)
            await #expect {
                _ = try await store.countUnconsumed()
            } throws: { error in
                (error as? LedgerError)?.code == .missingTable
            }
        }
    }
}

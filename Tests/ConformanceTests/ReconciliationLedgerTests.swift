import Foundation
import Fulfilment
import IAPTestSupport
import Ledger
import Testing

@Suite("The reconciler's tables on SQLite, PostgreSQL and memory", .timeLimit(.minutes(2)))
struct ReconciliationLedgerTests {
    static func rejection(_ seq: String, user: String, reason: ConsumeFailureReason, at date: Date = Date())
        -> RejectionRecord
    {
        RejectionRecord(
            key: RejectionKey(paymentSeq: seq, userId: user, tokenHash: "h-\(seq)"), reason: reason.rawValue,
            detail: "d",
            eventID: "\(seq):consume-failed:\(user)", rejectedAt: date)
    }

    @Test(arguments: LedgerBackend.allCases)
    func theUsersAreThoseWithRecentGrantsOrRejectionsGamebaseConfirmedAsTheirs(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let now = Date()
            let grants = [
                ("g1", "u-new", now), ("g2", "u-two", now), ("g3", "u-two", now.addingTimeInterval(-60)),
                ("g4", "u-old", now.addingTimeInterval(-100 * 3_600)),
            ]
            for (seq, user, date) in grants {
                _ = try await store.insertGrant(
                    LedgerStoreTests.grant(seq, user: user, at: date),
                    event: LedgerStoreTests.event("\(seq):item-granted", seq: seq))
            }
            let rejections: [(String, String, ConsumeFailureReason)] = [
                ("r1", "u-sub", .notConsumable), ("r2", "u-test", .testPurchase),
                ("r3", "u-elsewhere", .consumedWithoutGrant),
                // A userId Gamebase did not confirm is anyone's to write: never a reason to call Gamebase.
                ("r4", "u-thief", .userMismatch), ("r5", "u-forger", .invalidPurchase),
                ("r6", "u-mismatch", .paymentMismatch),
            ]
            for (seq, user, reason) in rejections {
                let record = Self.rejection(seq, user: user, reason: reason, at: now.addingTimeInterval(-30))
                #expect(
                    try await store.insertRejection(record, event: LedgerStoreTests.event(record.eventID, seq: seq)))
            }
            _ = try await store.insertRejection(
                Self.rejection(
                    "r7", user: "u-old-sub", reason: .notConsumable, at: now.addingTimeInterval(-100 * 3_600)),
                event: LedgerStoreTests.event("r7:consume-failed:x", seq: "r7"))

            let since = now.addingTimeInterval(-72 * 3_600)
            // Without claims (`reconcile`): every active user, read from the grants and rejections themselves.
            #expect(
                try await store.reconciliationUsers(activeSince: since, dueAt: nil, limit: 100) == [
                    "u-elsewhere", "u-new", "u-sub", "u-test", "u-two",
                ])
            // Due users: a user never checked is due from its first activity in the window, and the page is read in
            // the order users fell due (the one waiting longest first).
            let expected = ["u-two", "u-elsewhere", "u-sub", "u-test", "u-new"]
            // Read from the users table: nobody is due before it is refreshed.
            #expect(try await store.reconciliationUsers(activeSince: since, dueAt: now, limit: 100).isEmpty)
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            #expect(try await store.reconciliationUsers(activeSince: since, dueAt: now, limit: 100) == expected)
            #expect(
                try await store.reconciliationUsers(activeSince: since, dueAt: now, limit: 2) == [
                    "u-two", "u-elsewhere",
                ])
            // Activity after the pass started is due at the next pass.
            #expect(
                try await store.reconciliationUsers(activeSince: since, dueAt: now.addingTimeInterval(-45), limit: 100)
                    == ["u-two"])

            // Claimed users are due again once their next check comes.
            #expect(
                try await store.claimReconciliationUsers(["u-test"], now: now, nextCheck: now.addingTimeInterval(10))
                    == ["u-test"])
            #expect(
                try await store.claimReconciliationUsers(["u-two"], now: now, nextCheck: now.addingTimeInterval(5)) == [
                    "u-two"
                ])
            #expect(
                try await store.reconciliationUsers(activeSince: since, dueAt: now, limit: 100) == [
                    "u-elsewhere", "u-sub", "u-new",
                ])
            #expect(
                try await store.reconciliationUsers(activeSince: since, dueAt: now.addingTimeInterval(20), limit: 100)
                    == ["u-elsewhere", "u-sub", "u-new", "u-two", "u-test"])
            #expect(
                try await store.reconciliationUsers(activeSince: since, dueAt: nil, limit: 100)
                    == ["u-elsewhere", "u-sub", "u-new", "u-two", "u-test"], "all of them, whether claimed or not")
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aGrantStampedByAClockRunningAheadHidesNoOtherUsersGrant(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let now = Date()
            let since = now.addingTimeInterval(-72 * 3_600)
            let later = now.addingTimeInterval(7_200)
            _ = try await store.insertGrant(
                LedgerStoreTests.grant("ahead", user: "u-ahead", at: now.addingTimeInterval(3_600)),
                event: LedgerStoreTests.event("ahead:item-granted", seq: "ahead"))
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            #expect(try await store.reconciliationUsers(activeSince: since, dueAt: later, limit: 100) == ["u-ahead"])
            // Written after that scan by instances whose clocks are right: one now, one a minute ago (its transaction
            // committed late).
            for (seq, user, at) in [("now", "u-now", now), ("late", "u-late", now.addingTimeInterval(-60))] {
                _ = try await store.insertGrant(
                    LedgerStoreTests.grant(seq, user: user, at: at),
                    event: LedgerStoreTests.event("\(seq):item-granted", seq: seq))
            }
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            #expect(
                Set(try await store.reconciliationUsers(activeSince: since, dueAt: later, limit: 100))
                    == ["u-ahead", "u-now", "u-late"])
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func moreGrantsInOneMillisecondThanAScanChunkAreAllSeen(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let at = Date().addingTimeInterval(-3_600)
            let count = 6_001
            try await Self.insertGrants(count, stampedAt: at, named: "tie", into: store)
            let since = Date().addingTimeInterval(-72 * 3_600)
            #expect(try await store.refreshReconciliationUsers(activeSince: since), "caught up in one refresh")
            let users = try await store.reconciliationUsers(activeSince: since, dueAt: Date(), limit: 10_000)
            #expect(users.count == count)
            #expect(Set(users).count == count)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aRecentMillisecondFullerThanAChunkDoesNotCarryTheMarkPastTheOverlap(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            // 30 s ago: inside the 2-minute overlap, where a grant stamped earlier may still commit.
            let at = Date().addingTimeInterval(-30)
            let count = 5_001
            try await Self.insertGrants(count, stampedAt: at, named: "rtie", into: store)
            let since = Date().addingTimeInterval(-72 * 3_600)
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            // Stamped a minute ago, before that millisecond, and committed only now.
            _ = try await store.insertGrant(
                LedgerStoreTests.grant("slow", user: "u-slow", at: Date().addingTimeInterval(-60)),
                event: LedgerStoreTests.event("slow:item-granted", seq: "slow"))
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            let users = try await store.reconciliationUsers(activeSince: since, dueAt: Date(), limit: 10_000)
            #expect(users.contains("u-slow"))
            #expect(users.count == count + 1)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aBurstOfRecentGrantsLongerThanAScanChunkIsReadInOneCall(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            // Each at its own millisecond within the last minute: inside the 2-minute overlap.
            let start = Date().addingTimeInterval(-60)
            let count = 6_001
            for first in stride(from: 0, to: count, by: 1_000) {
                _ = try await store.insertGrants(
                    (first..<min(first + 1_000, count)).map { i in
                        GrantWrite(
                            grant: LedgerStoreTests.grant(
                                "burst\(i)", user: "burst-user-\(i)", at: start.addingTimeInterval(Double(i) / 1_000)),
                            event: LedgerStoreTests.event("burst\(i):item-granted", seq: "burst\(i)"))
                    })
            }
            let since = Date().addingTimeInterval(-72 * 3_600)
            #expect(try await store.refreshReconciliationUsers(activeSince: since), "caught up in one refresh")
            let users = try await store.reconciliationUsers(activeSince: since, dueAt: Date(), limit: 10_000)
            #expect(Set(users).count == count)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func eachUserIsClaimedByOneInstanceOnlyWhateverRunsAtOnce(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend, maxConnections: 24) { store in
            let users = (0..<60).map { "user-\($0)" }
            let now = Date()
            let next = now.addingTimeInterval(600)
            // Twenty "instances" (pool connections on PostgreSQL) claim overlapping batches at the same moment.
            let claims = try await withThrowingTaskGroup(of: [String].self) { group in
                for instance in 0..<20 {
                    group.addTask {
                        var claimed: [String] = []
                        var generator = SystemRandomNumberGenerator()
                        let mine = users.shuffled(using: &generator)
                        for start in stride(from: 0, to: mine.count, by: 7 + instance % 5) {
                            claimed += try await store.claimReconciliationUsers(
                                Array(mine[start..<min(start + 7 + instance % 5, mine.count)]), now: now,
                                nextCheck: next)
                        }
                        return claimed
                    }
                }
                return try await group.reduce(into: []) { $0.append(contentsOf: $1) }
            }
            #expect(claims.count == users.count, "no user claimed twice")
            #expect(Set(claims) == Set(users), "every user claimed")
            #expect(
                try await store.claimReconciliationUsers(users, now: now.addingTimeInterval(599), nextCheck: next)
                    .isEmpty)
            #expect(
                try await store.claimReconciliationUsers(users, now: next, nextCheck: next.addingTimeInterval(600))
                    .count == 60)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aPaymentKeepsWhenItWasFirstSeenUntilItIsForgottenOrPruned(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let first = Date(timeIntervalSince1970: 1_800_000_000)
            let later = first.addingTimeInterval(300)
            let a = ReconciliationSighting(paymentSeq: "a", userId: "u1")
            let b = ReconciliationSighting(paymentSeq: "b", userId: "u1")
            #expect(
                try await store.reconciliationSightings([a], now: first, record: false).isEmpty,
                "a dry run records nothing")
            #expect(try await store.reconciliationSightings([a], now: first, record: true) == ["a": first])
            #expect(
                try await store.reconciliationSightings([a, b], now: later, record: true) == ["a": first, "b": later])
            #expect(
                try await store.reconciliationSightings([a, b], now: later.addingTimeInterval(9), record: false) == [
                    "a": first, "b": later,
                ])
            try await store.forgetReconciliationSightings(paymentSeqs: ["a"])
            #expect(try await store.reconciliationSightings([a, b], now: later, record: false) == ["b": later])
            _ = try await store.claimReconciliationUsers(["u1"], now: first, nextCheck: first.addingTimeInterval(60))
            try await store.pruneReconciliation(before: later.addingTimeInterval(1))
            #expect(try await store.reconciliationSightings([a, b], now: later, record: false).isEmpty)
            // The pruned claim is gone: the user is due at once.
            #expect(try await store.claimReconciliationUsers(["u1"], now: first, nextCheck: later) == ["u1"])
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aGrantKeepsHowItsPaymentWasFound(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            var reconciled = LedgerStoreTests.grant("o1")
            reconciled.source = nil
            reconciled.origin = .reconciliation
            _ = try await store.insertGrant(reconciled, event: LedgerStoreTests.event("o1:item-granted", seq: "o1"))
            _ = try await store.insertGrant(
                LedgerStoreTests.grant("o2"), event: LedgerStoreTests.event("o2:item-granted", seq: "o2"))
            let one = try #require(try await store.grant(paymentSeq: "o1"))
            #expect(one.origin == .reconciliation)
            #expect(one.source == nil)
            #expect(try await store.grant(paymentSeq: "o2")?.origin == .message)
            let claimed = try await store.claimUnconsumedGrants(
                grantedBefore: Date().addingTimeInterval(60), limit: 10, lease: .seconds(30), now: Date())
            #expect(Set(claimed.map(\.origin)) == [.reconciliation, .message])
        }
    }

    /// `count` grants of as many users (`<name><i>`, `<name>-user-<i>`), all stamped at one millisecond.
    static func insertGrants(_ count: Int, stampedAt at: Date, named name: String, into store: any TestLedger)
        async throws
    {
        for start in stride(from: 0, to: count, by: 1_000) {
            _ = try await store.insertGrants(
                (start..<min(start + 1_000, count)).map { i in
                    GrantWrite(
                        grant: LedgerStoreTests.grant("\(name)\(i)", user: "\(name)-user-\(i)", at: at),
                        event: LedgerStoreTests.event("\(name)\(i):item-granted", seq: "\(name)\(i)"))
                })
        }
    }
}

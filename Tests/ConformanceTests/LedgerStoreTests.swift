import Foundation
import Fulfilment
import IAPTestSupport
import Ledger
import Testing

@Suite("Ledger stores on SQLite, PostgreSQL and memory", .timeLimit(.minutes(2)))
struct LedgerStoreTests {
    static func grant(_ seq: String, user: String = "user-1", at date: Date = Date()) -> GrantRecord {
        GrantRecord(
            paymentSeq: seq, userId: user, gamebaseProductId: "gem_pack_100", purchaseToken: "tok-\(seq)",
            productSeq: 42,
            marketId: "GG", productType: "CONSUMABLE", price: "2.29", currency: "EUR", paymentId: "GPA.\(seq)",
            isTestPurchase: false, purchaseTime: "2024-05-13T10:20:30+09:00", payload: "p", grantedAt: date,
            source: MessageSource(topic: "purchase.completed", partition: 3, offset: 77))
    }

    static func event(_ id: String, seq: String?, at date: Date = Date()) -> OutboxEvent {
        OutboxEvent(
            id: id, paymentSeq: seq, topic: "iap.item-granted", key: Array("user-1".utf8),
            headers: [
                EventHeader(name: "content-type", value: "application/cloudevents+json"),
                EventHeader(name: "ce_id", value: "\(id) \"quoted\" back\\slash\nnew line \u{1} é 🎮"),
            ],
            payload: Array(#"{"id":"\#(id)"}"#.utf8), createdAt: date)
    }

    // Migrations are the SQL stores' own (the memory ledger has no schema).
    @Test(arguments: LedgerBackend.sql)
    func migrationsRunOnceAndAgainSafely(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshStore(backend) { store in
            try await store.migrate()
            try await store.migrate()
            #expect(
                try await store.stats() == LedgerStats(granted: 0, consumed: 0, rejections: [:], unpublishedEvents: 0))
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aGrantIsWrittenOnceWithItsEvent(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let first = Self.grant("100")
            #expect(try await store.insertGrant(first, event: Self.event("100:item-granted", seq: "100")) == .inserted)
            let stored = try #require(try await store.grant(paymentSeq: "100"))
            #expect(stored.userId == "user-1")
            #expect(stored.price == "2.29")
            #expect(stored.state == .granted)
            #expect(stored.source == MessageSource(topic: "purchase.completed", partition: 3, offset: 77))
            #expect(abs(stored.grantedAt.timeIntervalSince(first.grantedAt)) < 0.002)

            var second = Self.grant("100", user: "someone-else")
            second.gamebaseProductId = "other"
            let again = try await store.insertGrant(second, event: Self.event("100:item-granted-2", seq: "100"))
            #expect(again == .alreadyGranted(stored))
            #expect(try await store.events(paymentSeq: "100").map(\.id) == ["100:item-granted"])
            #expect(try await store.grant(paymentSeq: "missing") == nil)
        }
    }

    /// Every column of a grant in any state (the grant insert binds them itself, in the columns' order).
    @Test(arguments: LedgerBackend.allCases)
    func aGrantInAnyStateReadsBackAsWritten(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let at = Date(epochMilliseconds: 1_732_400_000_123)
            var grant = Self.grant("150", at: at)
            grant.state = .consumed
            grant.consumedAt = Date(epochMilliseconds: 1_732_400_001_456)
            grant.consumeAttempts = 3
            grant.lastResultCode = 5018
            grant.eventPublishedAt = Date(epochMilliseconds: 1_732_400_000_789)
            grant.origin = .reconciliation
            grant.messageTimestampMilliseconds = Int64.max
            grant.isTestPurchase = true
            grant.payload = ""
            let result = try await store.insertGrant(grant, event: Self.event("150:item-granted", seq: "150", at: at))
            #expect(result == .inserted)
            let stored = try #require(try await store.grant(paymentSeq: "150"))
            #expect(stored == grant)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func consumeIsACompareAndSet(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            _ = try await store.insertGrant(Self.grant("200"), event: Self.event("200:item-granted", seq: "200"))
            try await store.recordConsumeFailure(paymentSeq: "200", resultCode: 9999)
            #expect(try await store.grant(paymentSeq: "200")?.consumeAttempts == 1)
            #expect(try await store.grant(paymentSeq: "200")?.lastResultCode == 9999)
            #expect(try await store.markConsumed(paymentSeq: "200", resultCode: 0, at: Date()))
            #expect(try await store.markConsumed(paymentSeq: "200", resultCode: 5018, at: Date()) == false)
            #expect(try await store.markConsumed(paymentSeq: "nope", resultCode: 0, at: Date()) == false)
            let consumed = try #require(try await store.grant(paymentSeq: "200"))
            #expect(consumed.state == .consumed)
            #expect(consumed.consumeAttempts == 2)
            #expect(consumed.lastResultCode == 0)
            #expect(consumed.consumedAt != nil)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func rejectionsBelongToTheMessageNotThePaymentSeq(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let forged = RejectionKey(paymentSeq: "300", userId: "thief", tokenHash: "aaa")
            let rejection = RejectionRecord(
                key: forged, reason: "user_mismatch", detail: "d", eventID: "300:consume-failed:x", rejectedAt: Date())
            #expect(try await store.insertRejection(rejection, event: Self.event("300:consume-failed:x", seq: "300")))
            #expect(
                try await store.insertRejection(rejection, event: Self.event("300:consume-failed:x", seq: "300"))
                    == false)
            #expect(try await store.rejection(forged)?.reason == "user_mismatch")
            #expect(
                try await store.rejection(RejectionKey(paymentSeq: "300", userId: "owner", tokenHash: "bbb")) == nil)
            // The owner's genuine message can still be granted.
            #expect(
                try await store.insertGrant(
                    Self.grant("300", user: "owner"), event: Self.event("300:item-granted", seq: "300")) == .inserted)
            #expect(try await store.rejections(paymentSeq: "300").count == 1)
            let stats = try await store.stats()
            #expect(stats.rejections == ["user_mismatch": 1])
            #expect(stats.granted == 1)
            #expect(stats.unpublishedEvents == 2)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func publishingMarksTheEventAndTheGrant(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            _ = try await store.insertGrant(Self.grant("400"), event: Self.event("400:item-granted", seq: "400"))
            #expect(try await store.event(id: "400:item-granted")?.publishedAt == nil)
            try await store.markPublished(eventID: "400:item-granted", at: Date())
            #expect(try await store.event(id: "400:item-granted")?.publishedAt != nil)
            #expect(try await store.grant(paymentSeq: "400")?.eventPublishedAt != nil)
            let event = try #require(try await store.event(id: "400:item-granted"))
            #expect(event.headers == Self.event("400:item-granted", seq: "400").headers)
            #expect(event.key == Array("user-1".utf8))
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func sweeperClaimsAreLeasedSoWorkersShareThem(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let old = Date().addingTimeInterval(-120)
            for i in 0..<5 {
                _ = try await store.insertGrant(
                    Self.grant("50\(i)", at: old), event: Self.event("50\(i):item-granted", seq: "50\(i)", at: old))
            }
            _ = try await store.insertGrant(Self.grant("fresh"), event: Self.event("fresh:item-granted", seq: "fresh"))
            _ = try await store.markConsumed(paymentSeq: "504", resultCode: 0, at: Date())
            let cutoff = Date().addingTimeInterval(-60)
            let now = Date()
            let first = try await store.claimUnconsumedGrants(
                grantedBefore: cutoff, limit: 3, lease: .seconds(30), now: now)
            let second = try await store.claimUnconsumedGrants(
                grantedBefore: cutoff, limit: 3, lease: .seconds(30), now: now)
            #expect(first.count == 3)
            #expect(second.count == 1)
            #expect(Set(first.map(\.paymentSeq)).isDisjoint(with: second.map(\.paymentSeq)))
            #expect(Set((first + second).map(\.paymentSeq)) == ["500", "501", "502", "503"])
            #expect(
                try await store.claimUnconsumedGrants(grantedBefore: cutoff, limit: 10, lease: .seconds(30), now: now)
                    .isEmpty)
            // After the lease runs out, unfinished rows come back.
            let later = now.addingTimeInterval(31)
            #expect(
                try await store.claimUnconsumedGrants(grantedBefore: cutoff, limit: 10, lease: .seconds(30), now: later)
                    .count == 4)

            let events = try await store.claimUnpublishedEvents(
                createdBefore: cutoff, limit: 10, lease: .seconds(30), now: now)
            #expect(events.count == 5)
            #expect(
                try await store.claimUnpublishedEvents(createdBefore: cutoff, limit: 10, lease: .seconds(30), now: now)
                    .isEmpty)
        }
    }

    /// A wall clock stepped back an hour after a sweeper leased its rows: the leases' ends lie further ahead than a
    /// lease reaches, so they have ended (before, they held for the hour).
    @Test(arguments: LedgerBackend.allCases)
    func aSweeperLeaseTakenBeforeTheClockSteppedBackEndsWithItsLength(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let old = Date().addingTimeInterval(-7_200)
            _ = try await store.insertGrant(
                Self.grant("600", at: old), event: Self.event("600:item-granted", seq: "600", at: old))
            let (cutoff, now) = (Date().addingTimeInterval(-5_400), Date())
            #expect(
                try await store.claimUnconsumedGrants(grantedBefore: cutoff, limit: 10, lease: .seconds(30), now: now)
                    .count == 1)
            #expect(
                try await store.claimUnpublishedEvents(createdBefore: cutoff, limit: 10, lease: .seconds(30), now: now)
                    .count == 1)
            // A claimant whose `now` is 20 s behind (read before a slow step, or a clock a little behind) leaves a
            // running lease alone: only one further ahead than a whole lease beyond its own is from before a step.
            let behind = now.addingTimeInterval(-20)
            #expect(
                try await store.claimUnconsumedGrants(
                    grantedBefore: cutoff, limit: 10, lease: .seconds(30), now: behind
                ).isEmpty)
            #expect(
                try await store.claimUnpublishedEvents(
                    createdBefore: cutoff, limit: 10, lease: .seconds(30), now: behind
                ).isEmpty)
            let back = now.addingTimeInterval(-3_600)
            #expect(
                try await store.claimUnconsumedGrants(grantedBefore: cutoff, limit: 10, lease: .seconds(30), now: back)
                    .count == 1, "a lease ending an hour and 30 s ahead is from before the step")
            #expect(
                try await store.claimUnpublishedEvents(createdBefore: cutoff, limit: 10, lease: .seconds(30), now: back)
                    .count == 1)
            // The new leases hold for their length on the stepped clock.
            #expect(
                try await store.claimUnconsumedGrants(
                    grantedBefore: cutoff, limit: 10, lease: .seconds(30), now: back.addingTimeInterval(10)
                ).isEmpty)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func concurrentGrantsOfOnePaymentMakeExactlyOneRow(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend, maxConnections: 30) { store in
            let results = try await withThrowingTaskGroup(of: GrantInsertResult.self) { group in
                for i in 0..<40 {
                    group.addTask {
                        try await store.insertGrant(
                            Self.grant("race", user: "u\(i)"), event: Self.event("race:item-granted", seq: "race"))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.filter { $0 == .inserted }.count == 1)
            let winner = try #require(try await store.grant(paymentSeq: "race"))
            #expect(results.allSatisfy { $0 == .inserted || $0 == .alreadyGranted(winner) })
            #expect(try await store.events(paymentSeq: "race").count == 1)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func concurrentGrantsOfManyPaymentsEachMakeOneRow(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend, maxConnections: 30) { store in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<400 {
                    group.addTask {
                        let seq = "m\(i % 100)"
                        _ = try await store.insertGrant(
                            Self.grant(seq), event: Self.event("\(seq):item-granted", seq: seq))
                    }
                }
                try await group.waitForAll()
            }
            let stats = try await store.stats()
            #expect(stats.granted == 100)
            #expect(stats.unpublishedEvents == 100)
        }
    }
}

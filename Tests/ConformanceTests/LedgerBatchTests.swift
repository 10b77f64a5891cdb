import Foundation
import Fulfilment
import IAPTestSupport
import Ledger
import Synchronization
import Testing

/// The stores' batch operations give what the single operations give in turn, in one read or one transaction.
@Suite("Ledger batches on SQLite, PostgreSQL and memory", .timeLimit(.minutes(2)))
struct LedgerBatchTests {
    typealias T = LedgerStoreTests

    static func rejection(_ seq: String, user: String, reason: String = "invalid_purchase") -> RejectionWrite {
        let key = RejectionKey(paymentSeq: seq, userId: user, tokenHash: "hash-\(user)")
        let id = "\(seq):consume-failed:\(user)"
        return RejectionWrite(
            rejection: RejectionRecord(key: key, reason: reason, eventID: id, rejectedAt: Date()),
            event: OutboxEvent(
                id: id, paymentSeq: seq, topic: "iap.consume-failed", key: nil, headers: [], payload: Array("{}".utf8),
                createdAt: Date()))
    }

    @Test(arguments: LedgerBackend.allCases)
    func grantsInOneBatchAreWrittenOnceEachWithTheirEvents(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            _ = try await store.insertGrant(T.grant("b0"), event: T.event("b0:item-granted", seq: "b0"))
            var writes = (0..<5).map {
                GrantWrite(grant: T.grant("b\($0)"), event: T.event("b\($0):item-granted", seq: "b\($0)"))
            }
            // The same paymentSeq twice in one batch (another user's claim racing): the first wins.
            writes.append(GrantWrite(grant: T.grant("b3", user: "other"), event: T.event("b3:item-granted", seq: "b3")))
            let results = try await store.insertGrants(writes)
            #expect(results.count == 6)
            guard case .alreadyGranted(let existing) = results[0] else {
                return #expect(Bool(false), "b0 was granted before")
            }
            #expect(existing.paymentSeq == "b0")
            #expect(Array(results[1...4]) == Array(repeating: .inserted, count: 4))
            guard case .alreadyGranted(let first) = results[5] else {
                return #expect(Bool(false), "b3 twice in a batch")
            }
            #expect(first.userId == "user-1")
            for i in 0..<5 {
                #expect(try await store.events(paymentSeq: "b\(i)").map(\.id) == ["b\(i):item-granted"])
            }
            #expect(try await store.stats().granted == 5)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aLookupBatchFindsEachMessagesGrantAndOwnRejection(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            _ = try await store.insertGrant(T.grant("l1"), event: T.event("l1:item-granted", seq: "l1"))
            _ = try await store.insertRejections([
                Self.rejection("l1", user: "thief"), Self.rejection("l2", user: "u2"),
            ])
            let keys = [
                RejectionKey(paymentSeq: "l1", userId: "thief", tokenHash: "hash-thief"),
                RejectionKey(paymentSeq: "l1", userId: "user-1", tokenHash: "hash-user-1"),
                RejectionKey(paymentSeq: "l2", userId: "u2", tokenHash: "hash-u2"),
                RejectionKey(paymentSeq: "l3", userId: "u3", tokenHash: "hash-u3"),
                // Canonically equivalent to a stored paymentSeq, other bytes: another paymentSeq.
                RejectionKey(paymentSeq: "l\u{301}1", userId: "thief", tokenHash: "hash-thief"),
            ]
            let found = try await store.lookup(keys)
            #expect(found.map { $0.grant?.paymentSeq } == ["l1", "l1", nil, nil, nil])
            #expect(found.map { $0.rejection?.key.userId } == ["thief", nil, "u2", nil, nil])
            for (key, batch) in zip(keys, found) {
                let single = try await store.lookup(key)
                #expect(single.grant == batch.grant && single.rejection == batch.rejection)
            }
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func rejectionsInABatchAreWrittenOnce(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let first = try await store.insertRejections([
                Self.rejection("r1", user: "a"), Self.rejection("r1", user: "b"),
            ])
            #expect(first == [true, true])
            let again = try await store.insertRejections([
                Self.rejection("r1", user: "a"), Self.rejection("r2", user: "c"), Self.rejection("r2", user: "c"),
            ])
            #expect(again == [false, true, false])
            #expect(try await store.events(paymentSeq: "r1").count == 2)
            #expect(try await store.events(paymentSeq: "r2").count == 1)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func consumeOutcomesAndPublishedMarksGoInOneBatch(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            for seq in ["c1", "c2", "c3"] {
                _ = try await store.insertGrant(T.grant(seq), event: T.event("\(seq):item-granted", seq: seq))
            }
            let now = Date()
            let results = try await store.recordConsumes([
                ConsumeRecord(
                    paymentSeq: "c1", consumed: true, resultCode: 0, at: now, publishedEventID: "c1:item-granted"),
                ConsumeRecord(
                    paymentSeq: "c2", consumed: false, resultCode: nil, at: now, publishedEventID: "c2:item-granted"),
                ConsumeRecord(paymentSeq: "c3", consumed: true, resultCode: 5018, at: now),
                ConsumeRecord(paymentSeq: "missing", consumed: true, resultCode: 0, at: now),
            ])
            #expect(results == [true, false, true, false])
            let c1 = try #require(try await store.grant(paymentSeq: "c1"))
            #expect(c1.state == .consumed && c1.eventPublishedAt != nil && c1.consumeAttempts == 1)
            let c2 = try #require(try await store.grant(paymentSeq: "c2"))
            #expect(
                c2.state == .granted && c2.eventPublishedAt != nil && c2.consumeAttempts == 1
                    && c2.lastResultCode == nil)
            let c3 = try #require(try await store.grant(paymentSeq: "c3"))
            #expect(c3.state == .consumed && c3.lastResultCode == 5018 && c3.eventPublishedAt == nil)
            #expect(
                try await store.recordConsumes([ConsumeRecord(paymentSeq: "c1", consumed: true, resultCode: 0, at: now)]
                ) == [false])
            try await store.markPublished([
                PublishedEvent(id: "c3:item-granted", at: now), PublishedEvent(id: "nothing", at: now),
            ])
            #expect(try await store.grant(paymentSeq: "c3")?.eventPublishedAt != nil)
            #expect(try await store.stats().unpublishedEvents == 0)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func theBatcherCoalescesConcurrentCallsAndAnswersEachItsOwn(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { base in
            let counting = CountingLedger(base)
            let store = FlowLedger(counting)
            let results = try await withThrowingTaskGroup(of: (Int, GrantInsertResult).self) { group in
                for i in 0..<200 {
                    group.addTask {
                        // Every other one races another worker for the same paymentSeq.
                        let seq = "k\(i / 2)"
                        let result = try await store.insertGrant(
                            T.grant(seq, user: "u\(i)"), event: T.event("\(seq):item-granted", seq: seq))
                        return (i, result)
                    }
                }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            #expect(results.count == 200)
            #expect(results.values.filter { $0 == .inserted }.count == 100, "one grant per paymentSeq")
            for i in stride(from: 0, to: 200, by: 2) {
                let winner = results[i] == .inserted ? i : i + 1
                #expect(try await base.grant(paymentSeq: "k\(i / 2)")?.userId == "u\(winner)")
            }
            #expect(counting.grantBatches < 200, "calls went in batches (\(counting.grantBatches) batches)")
        }
    }

    /// The sweeper's failed attempt and the flow's successful Consume of one grant can meet in one batch: the
    /// grant ends consumed, whichever comes first.
    @Test(arguments: LedgerBackend.allCases)
    func aSuccessAndAFailureOfOneGrantInOneBatchLeaveItConsumed(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let now = Date()
            for seq in ["d1", "d2"] {
                _ = try await store.insertGrant(T.grant(seq), event: T.event("\(seq):item-granted", seq: seq))
            }
            let results = try await store.recordConsumes([
                ConsumeRecord(paymentSeq: "d1", consumed: false, resultCode: 9999, at: now),
                ConsumeRecord(paymentSeq: "d1", consumed: true, resultCode: 0, at: now),
                ConsumeRecord(paymentSeq: "d2", consumed: true, resultCode: 0, at: now),
                ConsumeRecord(paymentSeq: "d2", consumed: false, resultCode: 9999, at: now),
            ])
            #expect(results == [false, true, true, false])
            #expect(try await store.grant(paymentSeq: "d1")?.state == .consumed)
            #expect(try await store.grant(paymentSeq: "d2")?.state == .consumed)
        }
    }

    /// A value the database refuses (PostgreSQL's text holds no NUL) fails the purchase that carries it, not the
    /// others batched with it.
    @Test(arguments: LedgerBackend.allCases)
    func aRowTheDatabaseRefusesFailsOnlyItsOwnCallInABatch(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { base in
            let counting = CountingLedger(base)
            let store = FlowLedger(counting)
            let results = await withTaskGroup(of: (Int, Result<GrantInsertResult, any Error>).self) { group in
                for i in 0..<40 {
                    group.addTask {
                        var grant = T.grant("n\(i)")
                        if i == 7 { grant.payload = "before\u{0}after" }
                        do {
                            return (
                                i,
                                .success(
                                    try await store.insertGrant(
                                        grant, event: T.event("n\(i):item-granted", seq: "n\(i)")))
                            )
                        } catch {
                            return (i, .failure(error))
                        }
                    }
                }
                return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            for (i, result) in results {
                switch (backend, i, result) {
                case (.postgres, 7, .failure(let error)):
                    #expect((error as? LedgerError)?.code == .query, "\(error)")
                case (.postgres, 7, .success):
                    Issue.record("PostgreSQL stored a NUL in text")
                case (_, _, .success(let answer)):
                    #expect(answer == .inserted, "n\(i)")
                case (_, _, .failure(let error)):
                    Issue.record("n\(i) failed with its batch: \(error)")
                }
            }
            let granted = try await base.stats().granted
            #expect(granted == (backend == .postgres ? 39 : 40))
        }
    }

    /// A result code is whatever Gamebase answered: a value beyond the database's integer column is stored clamped,
    /// by the single calls and the batches alike, and never traps.
    @Test(arguments: LedgerBackend.allCases)
    func resultCodesAtTheExtremesAreStoredWithoutATrap(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            for seq in ["x1", "x2", "x3"] {
                _ = try await store.insertGrant(T.grant(seq), event: T.event("\(seq):item-granted", seq: seq))
            }
            let now = Date()
            try await store.recordConsumeFailure(paymentSeq: "x1", resultCode: Int.max)
            _ = try await store.markConsumed(paymentSeq: "x2", resultCode: Int.min, at: now)
            #expect(
                try await store.recordConsumes([
                    ConsumeRecord(paymentSeq: "x3", consumed: false, resultCode: Int.max, at: now)
                ]) == [false], "a failed attempt, counted")
            var rejection = Self.rejection("x4", user: "u4")
            rejection.rejection.resultCode = Int.min
            #expect(try await store.insertRejections([rejection]) == [true])
            var single = Self.rejection("x5", user: "u5")
            single.rejection.resultCode = Int.max
            #expect(try await store.insertRejection(single.rejection, event: single.event))
            let limit = backend == .postgres ? Int(Int32.max) : Int.max
            #expect(try await store.grant(paymentSeq: "x1")?.lastResultCode == limit)
            #expect(try await store.grant(paymentSeq: "x3")?.lastResultCode == limit)
            #expect(try await store.grant(paymentSeq: "x2")?.state == .consumed)
        }
    }
}

import Foundation
import Fulfilment
import IAPTestSupport
import Ledger
import Synchronization
import Testing

/// The stores' batch operations give what the single operations give in turn, in one read or one transaction.
@Suite("Ledger batches on SQLite and PostgreSQL", .timeLimit(.minutes(2)))
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
            var writes = (0..<5).map { GrantWrite(grant: T.grant("b\($0)"), event: T.event("b\($0):item-granted", seq: "b\($0)")) }
            // The same paymentSeq twice in one batch (another user's claim racing): the first wins.
            writes.append(GrantWrite(grant: T.grant("b3", user: "other"), event: T.event("b3:item-granted", seq: "b3")))
            let results = try await store.insertGrants(writes)
            #expect(results.count == 6)
            guard case .alreadyGranted(let existing) = results[0] else { return #expect(Bool(false), "b0 was granted before") }
            #expect(existing.paymentSeq == "b0")
            #expect(Array(results[1...4]) == Array(repeating: .inserted, count: 4))
            guard case .alreadyGranted(let first) = results[5] else { return #expect(Bool(false), "b3 twice in a batch") }
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
            _ = try await store.insertRejections([Self.rejection("l1", user: "thief"), Self.rejection("l2", user: "u2")])
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
                let single = try await store.lookup(paymentSeq: key.paymentSeq, rejection: key)
                #expect(single.grant == batch.grant && single.rejection == batch.rejection)
            }
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func rejectionsInABatchAreWrittenOnce(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            let first = try await store.insertRejections([Self.rejection("r1", user: "a"), Self.rejection("r1", user: "b")])
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
                ConsumeRecord(paymentSeq: "c1", consumed: true, resultCode: 0, at: now, publishedEventID: "c1:item-granted"),
                ConsumeRecord(paymentSeq: "c2", consumed: false, resultCode: nil, at: now, publishedEventID: "c2:item-granted"),
                ConsumeRecord(paymentSeq: "c3", consumed: true, resultCode: 5018, at: now),
                ConsumeRecord(paymentSeq: "missing", consumed: true, resultCode: 0, at: now),
            ])
            #expect(results == [true, false, true, false])
            let c1 = try #require(try await store.grant(paymentSeq: "c1"))
            #expect(c1.state == .consumed && c1.eventPublishedAt != nil && c1.consumeAttempts == 1)
            let c2 = try #require(try await store.grant(paymentSeq: "c2"))
            #expect(c2.state == .granted && c2.eventPublishedAt != nil && c2.consumeAttempts == 1 && c2.lastResultCode == nil)
            let c3 = try #require(try await store.grant(paymentSeq: "c3"))
            #expect(c3.state == .consumed && c3.lastResultCode == 5018 && c3.eventPublishedAt == nil)
            #expect(try await store.recordConsumes([ConsumeRecord(paymentSeq: "c1", consumed: true, resultCode: 0, at: now)]) == [false])
            try await store.markPublished([PublishedEvent(id: "c3:item-granted", at: now), PublishedEvent(id: "nothing", at: now)])
            #expect(try await store.grant(paymentSeq: "c3")?.eventPublishedAt != nil)
            #expect(try await store.stats().unpublishedEvents == 0)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func theBatcherCoalescesConcurrentCallsAndAnswersEachItsOwn(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { base in
            let counting = CountingStore(base)
            let store = LedgerBatcher(counting)
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
}

/// A store that counts the batches it is given.
final class CountingStore: LedgerStore, ReconciliationPassThrough {
    let base: any LedgerStore
    private let counts = Mutex(0)
    init(_ base: any LedgerStore) { self.base = base }
    var grantBatches: Int { counts.withLock { $0 } }

    func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult] {
        counts.withLock { $0 += 1 }
        return try await base.insertGrants(writes)
    }

    func migrate() async throws { try await base.migrate() }
    func grant(paymentSeq: String) async throws -> GrantRecord? { try await base.grant(paymentSeq: paymentSeq) }
    func rejection(_ key: RejectionKey) async throws -> RejectionRecord? { try await base.rejection(key) }
    func lookup(paymentSeq: String, rejection key: RejectionKey) async throws -> (grant: GrantRecord?, rejection: RejectionRecord?) {
        try await base.lookup(paymentSeq: paymentSeq, rejection: key)
    }
    func insertGrant(_ grant: GrantRecord, event: OutboxEvent) async throws -> GrantInsertResult {
        try await base.insertGrant(grant, event: event)
    }
    func insertRejection(_ rejection: RejectionRecord, event: OutboxEvent) async throws -> Bool {
        try await base.insertRejection(rejection, event: event)
    }
    func event(id: String) async throws -> OutboxEvent? { try await base.event(id: id) }
    func markPublished(eventID: String, at date: Date) async throws { try await base.markPublished(eventID: eventID, at: date) }
    func markConsumed(paymentSeq: String, resultCode: Int, at date: Date) async throws -> Bool {
        try await base.markConsumed(paymentSeq: paymentSeq, resultCode: resultCode, at: date)
    }
    func recordConsumeFailure(paymentSeq: String, resultCode: Int?) async throws {
        try await base.recordConsumeFailure(paymentSeq: paymentSeq, resultCode: resultCode)
    }
    func markConsumed(paymentSeq: String, resultCode: Int, at date: Date, publishedEventID: String?) async throws -> Bool {
        try await base.markConsumed(paymentSeq: paymentSeq, resultCode: resultCode, at: date, publishedEventID: publishedEventID)
    }
    func recordConsumeFailure(paymentSeq: String, resultCode: Int?, at date: Date, publishedEventID: String?) async throws {
        try await base.recordConsumeFailure(paymentSeq: paymentSeq, resultCode: resultCode, at: date, publishedEventID: publishedEventID)
    }
    func claimUnconsumedGrants(grantedBefore: Date, limit: Int, lease: Duration, now: Date) async throws -> [GrantRecord] {
        try await base.claimUnconsumedGrants(grantedBefore: grantedBefore, limit: limit, lease: lease, now: now)
    }
    func claimUnpublishedEvents(createdBefore: Date, limit: Int, lease: Duration, now: Date) async throws -> [OutboxEvent] {
        try await base.claimUnpublishedEvents(createdBefore: createdBefore, limit: limit, lease: lease, now: now)
    }
    func rejections(paymentSeq: String) async throws -> [RejectionRecord] { try await base.rejections(paymentSeq: paymentSeq) }
    func events(paymentSeq: String) async throws -> [OutboxEvent] { try await base.events(paymentSeq: paymentSeq) }
    func stats() async throws -> LedgerStats { try await base.stats() }
    func countUnconsumed() async throws -> Int { try await base.countUnconsumed() }
    func oldestUnconsumedGrantedAt() async throws -> Date? { try await base.oldestUnconsumedGrantedAt() }
    func close() async throws { try await base.close() }
}

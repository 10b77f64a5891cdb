import Foundation
import Fulfilment
import Ledger
import Synchronization

/// An in-memory ``LedgerStore`` with the SQL stores' semantics: one grant per paymentSeq (unique key, the loser gets
/// the winner's row), one rejection per (paymentSeq, userId, tokenHash), an outbox whose ids are unique, and guarded
/// state changes. Keys compare byte for byte, as the databases' do (`String ==` would not).
///
/// It can fail one chosen write, to run the flow's crash-and-redeliver paths: `insertGrant` and `insertRejection`
/// then commit and throw (a commit whose acknowledgement was lost), every other write throws before it applies.
public final class MemoryLedger: LedgerStore {
    public struct InjectedFailure: Error, CustomStringConvertible {
        public var description: String { "injected ledger failure" }
    }

    struct RejectionBytes: Hashable {
        var paymentSeq: [UInt8]
        var userId: [UInt8]
        var tokenHash: [UInt8]

        init(_ key: RejectionKey) {
            paymentSeq = Array(key.paymentSeq.utf8)
            userId = Array(key.userId.utf8)
            tokenHash = Array(key.tokenHash.utf8)
        }
    }

    struct State {
        var grants: [[UInt8]: GrantRecord] = [:]
        var rejections: [RejectionBytes: RejectionRecord] = [:]
        var outbox: [[UInt8]: OutboxEvent] = [:]
        var outboxOrder: [[UInt8]] = []
        /// Writes so far; the write with number `failWrite` (from 1) fails once.
        var writes = 0
        var failWrite: Int?
        /// Every successful grant insert, for the "never two grants" check.
        var grantInserts: [[UInt8]: Int] = [:]
        /// The reconciler's state: each user's next check, and when each payment was first seen (ms).
        var reconcileUsers: [String: Int64] = [:]
        var sightings: [String: (userId: String, firstSeen: Int64)] = [:]
    }

    let state = Mutex(State())

    public init() {}

    /// Makes the `number`-th write from now fail once (nil: none).
    public func failWrite(_ number: Int?) {
        state.withLock {
            $0.writes = 0
            $0.failWrite = number
        }
    }

    public var grants: [GrantRecord] { state.withLock { Array($0.grants.values) } }
    public func grant(bytes paymentSeq: String) -> GrantRecord? { state.withLock { $0.grants[Array(paymentSeq.utf8)] } }
    public func rejection(bytes key: RejectionKey) -> RejectionRecord? {
        state.withLock { $0.rejections[RejectionBytes(key)] }
    }
    public func grantInserts(_ paymentSeq: String) -> Int {
        state.withLock { $0.grantInserts[Array(paymentSeq.utf8)] ?? 0 }
    }
    public var events: [OutboxEvent] { state.withLock { state in state.outboxOrder.compactMap { state.outbox[$0] } } }

    /// Counts a write; true when this one is the one to fail.
    private static func failsNow(_ state: inout State) -> Bool {
        state.writes += 1
        guard state.writes == state.failWrite else { return false }
        state.failWrite = nil
        return true
    }

    private static func insert(_ event: OutboxEvent, _ state: inout State) {
        let id = Array(event.id.utf8)
        guard state.outbox[id] == nil else { return }
        state.outbox[id] = event
        state.outboxOrder.append(id)
    }

    public func migrate() async throws {}

    public func grant(paymentSeq: String) async throws -> GrantRecord? {
        grant(bytes: paymentSeq)
    }

    public func rejection(_ key: RejectionKey) async throws -> RejectionRecord? {
        rejection(bytes: key)
    }

    public func lookup(paymentSeq: String, rejection key: RejectionKey) async throws -> (
        grant: GrantRecord?, rejection: RejectionRecord?
    ) {
        state.withLock { ($0.grants[Array(paymentSeq.utf8)], $0.rejections[RejectionBytes(key)]) }
    }

    public func insertGrant(_ grant: GrantRecord, event: OutboxEvent) async throws -> GrantInsertResult {
        let (result, fails): (GrantInsertResult, Bool) = state.withLock { state in
            let fails = Self.failsNow(&state)
            let key = Array(grant.paymentSeq.utf8)
            if let existing = state.grants[key] { return (.alreadyGranted(existing), fails) }
            state.grants[key] = grant
            state.grantInserts[key, default: 0] += 1
            Self.insert(event, &state)
            return (.inserted, fails)
        }
        if fails { throw InjectedFailure() }
        return result
    }

    public func insertRejection(_ rejection: RejectionRecord, event: OutboxEvent) async throws -> Bool {
        let (inserted, fails): (Bool, Bool) = state.withLock { state in
            let fails = Self.failsNow(&state)
            let key = RejectionBytes(rejection.key)
            guard state.rejections[key] == nil else { return (false, fails) }
            state.rejections[key] = rejection
            Self.insert(event, &state)
            return (true, fails)
        }
        if fails { throw InjectedFailure() }
        return inserted
    }

    public func event(id: String) async throws -> OutboxEvent? {
        state.withLock { $0.outbox[Array(id.utf8)] }
    }

    private static func markPublished(_ eventID: String, at date: Date, _ state: inout State) {
        let id = Array(eventID.utf8)
        guard var event = state.outbox[id], event.publishedAt == nil else { return }
        event.publishedAt = date
        state.outbox[id] = event
        // As the SQL stores do: an item-granted event marks its grant's eventPublishedAt too.
        guard eventID.hasSuffix(":item-granted"), let paymentSeq = event.paymentSeq else { return }
        let key = Array(paymentSeq.utf8)
        if var grant = state.grants[key], grant.eventPublishedAt == nil {
            grant.eventPublishedAt = date
            state.grants[key] = grant
        }
    }

    private static func markConsumed(_ paymentSeq: String, resultCode: Int, at date: Date, _ state: inout State) -> Bool
    {
        let key = Array(paymentSeq.utf8)
        guard var grant = state.grants[key], grant.state == .granted else { return false }
        grant.state = .consumed
        grant.consumedAt = date
        grant.lastResultCode = resultCode
        grant.consumeAttempts += 1
        state.grants[key] = grant
        return true
    }

    private static func recordConsumeFailure(_ paymentSeq: String, resultCode: Int?, _ state: inout State) {
        let key = Array(paymentSeq.utf8)
        guard var grant = state.grants[key], grant.state == .granted else { return }
        grant.consumeAttempts += 1
        grant.lastResultCode = resultCode
        state.grants[key] = grant
    }

    /// Runs a write that applies only when it does not fail.
    private func write<T: Sendable>(_ body: (inout State) -> T) throws -> T {
        try state.withLock { state in
            if Self.failsNow(&state) { throw InjectedFailure() }
            return body(&state)
        }
    }

    public func markPublished(eventID: String, at date: Date) async throws {
        try write { Self.markPublished(eventID, at: date, &$0) }
    }

    public func markConsumed(paymentSeq: String, resultCode: Int, at date: Date) async throws -> Bool {
        try write { Self.markConsumed(paymentSeq, resultCode: resultCode, at: date, &$0) }
    }

    public func recordConsumeFailure(paymentSeq: String, resultCode: Int?) async throws {
        try write { Self.recordConsumeFailure(paymentSeq, resultCode: resultCode, &$0) }
    }

    public func markConsumed(paymentSeq: String, resultCode: Int, at date: Date, publishedEventID: String?) async throws
        -> Bool
    {
        try write { state in
            if let publishedEventID { Self.markPublished(publishedEventID, at: date, &state) }
            return Self.markConsumed(paymentSeq, resultCode: resultCode, at: date, &state)
        }
    }

    public func recordConsumeFailure(paymentSeq: String, resultCode: Int?, at date: Date, publishedEventID: String?)
        async throws
    {
        try write { state in
            if let publishedEventID { Self.markPublished(publishedEventID, at: date, &state) }
            Self.recordConsumeFailure(paymentSeq, resultCode: resultCode, &state)
        }
    }

    public func claimUnconsumedGrants(grantedBefore: Date, limit: Int, lease: Duration, now: Date) async throws
        -> [GrantRecord]
    {
        state.withLock { state in
            Array(
                state.grants.values.filter { $0.state == .granted && $0.grantedAt < grantedBefore }.prefix(
                    max(0, limit)))
        }
    }

    public func claimUnpublishedEvents(createdBefore: Date, limit: Int, lease: Duration, now: Date) async throws
        -> [OutboxEvent]
    {
        state.withLock { state in
            Array(
                state.outboxOrder.compactMap { state.outbox[$0] }.filter {
                    $0.publishedAt == nil && $0.createdAt < createdBefore
                }
                .prefix(max(0, limit)))
        }
    }

    public func rejections(paymentSeq: String) async throws -> [RejectionRecord] {
        let key = Array(paymentSeq.utf8)
        return state.withLock { $0.rejections.filter { $0.key.paymentSeq == key }.map(\.value) }
    }

    public func events(paymentSeq: String) async throws -> [OutboxEvent] {
        events.filter { $0.paymentSeq.map { Array($0.utf8) } == Array(paymentSeq.utf8) }
    }

    public func stats() async throws -> LedgerStats {
        state.withLock { state in
            var reasons: [String: Int] = [:]
            for rejection in state.rejections.values { reasons[rejection.reason, default: 0] += 1 }
            return LedgerStats(
                granted: state.grants.values.filter { $0.state == .granted }.count,
                consumed: state.grants.values.filter { $0.state == .consumed }.count, rejections: reasons,
                unpublishedEvents: state.outbox.values.filter { $0.publishedAt == nil }.count)
        }
    }

    public func countUnconsumed() async throws -> Int {
        state.withLock { $0.grants.values.filter { $0.state == .granted }.count }
    }

    public func oldestUnconsumedGrantedAt() async throws -> Date? {
        state.withLock { $0.grants.values.filter { $0.state == .granted }.map(\.grantedAt).min() }
    }

    public func close() async throws {}

    /// Duplicates are counted by the stores for people to read; the fuzz targets check outcomes, not counts.
    public func recordDuplicates(_ notes: [DuplicateNote]) async throws {}

    /// Dead letters are checked in the published records (a long fuzz run keeps no copy of each).
    public func recordDeadLetter(_ entry: DeadLetterEntry) async throws {}

    public func recordReprocessOutcome(deadLetter location: RecordLocation, outcome: String, at date: Date) async throws {}
}

import Foundation
import Fulfilment
import InMemoryLedger
import Synchronization

/// The purchases role of a ``MemoryLedger`` (the tests' memory ledger, held to the SQL stores by the conformance
/// suites: one grant per paymentSeq, the loser getting the winner's row; one rejection per (paymentSeq, userId,
/// tokenHash); an outbox whose ids are unique; guarded state changes; keys compared byte for byte) that can fail one
/// chosen write, to run the flow's crash-and-redeliver paths, and counts the grants it inserted.
///
/// A write is one call of `insertGrants`, `insertRejections`, `recordConsumes` or `markPublished` (the fuzz target runs
/// one record at a time, so each batch holds one purchase's write). Grant and rejection inserts then commit and throw
/// (a commit whose acknowledgement was lost); the other writes throw before they apply. Duplicate counts and
/// dead-letter records are passed on and never fail: the flow logs their failure and moves on.
public final class FaultyLedger: PurchaseLedger {
    public struct InjectedFailure: Error, CustomStringConvertible {
        public var description: String { "injected ledger failure" }
    }

    struct State {
        /// Writes so far; the write with number `failWrite` (from 1) fails once.
        var writes = 0
        var failWrite: Int?
        /// Every grant insert answered `.inserted`, by the paymentSeq's bytes: the "never two grants" check.
        var grantInserts: [[UInt8]: (paymentSeq: String, count: Int)] = [:]
    }

    /// The ledger itself, for the checks to read.
    public let memory: MemoryLedger
    let state = Mutex(State())

    public init(_ memory: MemoryLedger = MemoryLedger()) {
        self.memory = memory
    }

    /// Makes the `number`-th write from now fail once (nil: none).
    public func failWrite(_ number: Int?) {
        state.withLock {
            $0.writes = 0
            $0.failWrite = number
        }
    }

    /// Each paymentSeq a grant insert went in for, with how many inserts went in for it.
    public var grantInserts: [(paymentSeq: String, count: Int)] { state.withLock { Array($0.grantInserts.values) } }

    /// Counts a write; true when this one is the one to fail.
    private func failsNow() -> Bool {
        state.withLock { state in
            state.writes += 1
            guard state.writes == state.failWrite else { return false }
            state.failWrite = nil
            return true
        }
    }

    public func lookup(_ keys: [RejectionKey]) async throws -> [LedgerLookup] {
        try await memory.lookup(keys)
    }

    public func grant(paymentSeq: String) async throws -> GrantRecord? {
        try await memory.grant(paymentSeq: paymentSeq)
    }

    public func event(id: String) async throws -> OutboxEvent? {
        try await memory.event(id: id)
    }

    public func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult] {
        let fails = failsNow()
        let results = try await memory.insertGrants(writes)
        state.withLock { state in
            for (write, result) in zip(writes, results) where result == .inserted {
                state.grantInserts[Array(write.grant.paymentSeq.utf8), default: (write.grant.paymentSeq, 0)].count += 1
            }
        }
        if fails { throw InjectedFailure() }
        return results
    }

    public func insertRejections(_ writes: [RejectionWrite]) async throws -> [Bool] {
        let fails = failsNow()
        let results = try await memory.insertRejections(writes)
        if fails { throw InjectedFailure() }
        return results
    }

    public func recordConsumes(_ records: [ConsumeRecord]) async throws -> [Bool] {
        if failsNow() { throw InjectedFailure() }
        return try await memory.recordConsumes(records)
    }

    public func markPublished(_ events: [PublishedEvent]) async throws {
        if failsNow() { throw InjectedFailure() }
        try await memory.markPublished(events)
    }

    public func recordDuplicates(_ notes: [DuplicateNote]) async throws {
        try await memory.recordDuplicates(notes)
    }

    public func recordDeadLetter(_ entry: DeadLetterEntry) async throws {
        try await memory.recordDeadLetter(entry)
    }

    /// A write like the others: it can fail before it applies.
    public func setAsideRevokedGrant(paymentSeq: String, at date: Date) async throws -> Bool {
        if failsNow() { throw InjectedFailure() }
        return try await memory.setAsideRevokedGrant(paymentSeq: paymentSeq, at: date)
    }
}

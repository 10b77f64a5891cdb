import Foundation
import Fulfilment
import Synchronization

/// A real ledger that counts what it is asked: grant batches, and probes (``countUnconsumed()``), which can be
/// made slow.
public final class CountingLedger: LedgerStore, ReconciliationPassThrough {
    public let base: any LedgerStore
    private let counts = Mutex((grantBatches: 0, probes: 0))
    private let probeDelay: Duration
    public init(_ base: any LedgerStore, probeDelay: Duration = .zero) {
        self.base = base
        self.probeDelay = probeDelay
    }
    public var grantBatches: Int { counts.withLock { $0.grantBatches } }
    public var probes: Int { counts.withLock { $0.probes } }

    public func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult] {
        counts.withLock { $0.grantBatches += 1 }
        return try await base.insertGrants(writes)
    }

    public func migrate() async throws { try await base.migrate() }
    public func grant(paymentSeq: String) async throws -> GrantRecord? { try await base.grant(paymentSeq: paymentSeq) }
    public func rejection(_ key: RejectionKey) async throws -> RejectionRecord? { try await base.rejection(key) }
    public func lookup(paymentSeq: String, rejection key: RejectionKey) async throws -> (grant: GrantRecord?, rejection: RejectionRecord?) {
        try await base.lookup(paymentSeq: paymentSeq, rejection: key)
    }
    public func insertGrant(_ grant: GrantRecord, event: OutboxEvent) async throws -> GrantInsertResult {
        try await base.insertGrant(grant, event: event)
    }
    public func insertRejection(_ rejection: RejectionRecord, event: OutboxEvent) async throws -> Bool {
        try await base.insertRejection(rejection, event: event)
    }
    public func event(id: String) async throws -> OutboxEvent? { try await base.event(id: id) }
    public func markPublished(eventID: String, at date: Date) async throws { try await base.markPublished(eventID: eventID, at: date) }
    public func markConsumed(paymentSeq: String, resultCode: Int, at date: Date) async throws -> Bool {
        try await base.markConsumed(paymentSeq: paymentSeq, resultCode: resultCode, at: date)
    }
    public func recordConsumeFailure(paymentSeq: String, resultCode: Int?) async throws {
        try await base.recordConsumeFailure(paymentSeq: paymentSeq, resultCode: resultCode)
    }
    public func markConsumed(paymentSeq: String, resultCode: Int, at date: Date, publishedEventID: String?) async throws -> Bool {
        try await base.markConsumed(paymentSeq: paymentSeq, resultCode: resultCode, at: date, publishedEventID: publishedEventID)
    }
    public func recordConsumeFailure(paymentSeq: String, resultCode: Int?, at date: Date, publishedEventID: String?) async throws {
        try await base.recordConsumeFailure(paymentSeq: paymentSeq, resultCode: resultCode, at: date, publishedEventID: publishedEventID)
    }
    public func claimUnconsumedGrants(grantedBefore: Date, limit: Int, lease: Duration, now: Date) async throws -> [GrantRecord] {
        try await base.claimUnconsumedGrants(grantedBefore: grantedBefore, limit: limit, lease: lease, now: now)
    }
    public func claimUnpublishedEvents(createdBefore: Date, limit: Int, lease: Duration, now: Date) async throws -> [OutboxEvent] {
        try await base.claimUnpublishedEvents(createdBefore: createdBefore, limit: limit, lease: lease, now: now)
    }
    public func rejections(paymentSeq: String) async throws -> [RejectionRecord] { try await base.rejections(paymentSeq: paymentSeq) }
    public func events(paymentSeq: String) async throws -> [OutboxEvent] { try await base.events(paymentSeq: paymentSeq) }
    public func stats() async throws -> LedgerStats { try await base.stats() }
    public func countUnconsumed() async throws -> Int {
        counts.withLock { $0.probes += 1 }
        try await Task.sleep(for: probeDelay)
        return try await base.countUnconsumed()
    }
    public func oldestUnconsumedGrantedAt() async throws -> Date? { try await base.oldestUnconsumedGrantedAt() }
    public func close() async throws { try await base.close() }
}

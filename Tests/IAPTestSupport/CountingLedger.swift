import Foundation
import Fulfilment
import Synchronization

/// A real ledger's purchases and sweep roles, counting what they are asked: grant batches, and probes
/// (``countUnconsumed()``), which can be made slow.
public final class CountingLedger: PurchaseLedger, SweepLedger, LedgerProbe {
    public let purchases: any PurchaseLedger
    public let sweep: any SweepLedger
    public let probe: any LedgerProbe
    private let counts = Mutex((grantBatches: 0, probes: 0))
    private let probeDelay: Duration

    public init(_ base: some PurchaseLedger & SweepLedger & LedgerProbe, probeDelay: Duration = .zero) {
        self.purchases = base
        self.sweep = base
        self.probe = base
        self.probeDelay = probeDelay
    }

    public var grantBatches: Int { counts.withLock { $0.grantBatches } }
    public var probes: Int { counts.withLock { $0.probes } }

    public func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult] {
        counts.withLock { $0.grantBatches += 1 }
        return try await purchases.insertGrants(writes)
    }

    public func probeWrite() async throws {
        counts.withLock { $0.probes += 1 }
        try await Task.sleep(for: probeDelay)
        try await probe.probeWrite()
    }

    public func storageShortfall() -> LedgerError? { probe.storageShortfall() }

    public func countUnconsumed() async throws -> Int { try await sweep.countUnconsumed() }

    // The rest as the ledger answers it.
    public func lookup(_ keys: [RejectionKey]) async throws -> [LedgerLookup] { try await purchases.lookup(keys) }
    public func grant(paymentSeq: String) async throws -> GrantRecord? {
        try await purchases.grant(paymentSeq: paymentSeq)
    }
    public func event(id: String) async throws -> OutboxEvent? { try await purchases.event(id: id) }
    public func insertRejections(_ writes: [RejectionWrite]) async throws -> [Bool] {
        try await purchases.insertRejections(writes)
    }
    public func recordConsumes(_ records: [ConsumeRecord]) async throws -> [Bool] {
        try await purchases.recordConsumes(records)
    }
    public func markPublished(_ events: [PublishedEvent]) async throws { try await purchases.markPublished(events) }
    public func recordDuplicates(_ notes: [DuplicateNote]) async throws { try await purchases.recordDuplicates(notes) }
    public func recordDeadLetter(_ entry: DeadLetterEntry) async throws { try await purchases.recordDeadLetter(entry) }
    public func setAsideRevokedGrant(paymentSeq: String, at date: Date) async throws -> Bool {
        try await purchases.setAsideRevokedGrant(paymentSeq: paymentSeq, at: date)
    }
    public func claimUnconsumedGrants(grantedBefore: Date, limit: Int, lease: Duration, now: Date) async throws
        -> [GrantRecord]
    {
        try await sweep.claimUnconsumedGrants(grantedBefore: grantedBefore, limit: limit, lease: lease, now: now)
    }
    public func claimUnpublishedEvents(createdBefore: Date, limit: Int, lease: Duration, now: Date) async throws
        -> [OutboxEvent]
    {
        try await sweep.claimUnpublishedEvents(createdBefore: createdBefore, limit: limit, lease: lease, now: now)
    }
    public func oldestUnconsumedGrantedAt() async throws -> Date? { try await sweep.oldestUnconsumedGrantedAt() }
    public func countSetAside() async throws -> Int { try await sweep.countSetAside() }
    public func resumeSetAsideGrants() async throws -> Int { try await sweep.resumeSetAsideGrants() }
}

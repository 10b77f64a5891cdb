import Foundation

/// A ledger that wraps another and passes every primitive call through to it unchanged: a wrapper conforms and
/// writes only the calls it changes (the batcher coalesces some; a test ledger fails or counts some).
///
/// The combined and batch calls are not passed through: ``LedgerStore``'s defaults build them from the primitives
/// of the wrapper itself, so a wrapper that changes `insertGrant` changes what `insertGrants` does too. A wrapper
/// that wants the wrapped ledger's own combined or batch calls writes them (``LedgerBatcher`` does).
public protocol LedgerPassThrough: LedgerStore {
    var base: any LedgerStore { get }
}

extension LedgerPassThrough {
    public func migrate() async throws { try await base.migrate() }
    public func grant(paymentSeq: String) async throws -> GrantRecord? { try await base.grant(paymentSeq: paymentSeq) }
    public func rejection(_ key: RejectionKey) async throws -> RejectionRecord? { try await base.rejection(key) }

    public func insertGrant(_ grant: GrantRecord, event: OutboxEvent) async throws -> GrantInsertResult {
        try await base.insertGrant(grant, event: event)
    }

    public func insertRejection(_ rejection: RejectionRecord, event: OutboxEvent) async throws -> Bool {
        try await base.insertRejection(rejection, event: event)
    }

    public func event(id: String) async throws -> OutboxEvent? { try await base.event(id: id) }

    public func markPublished(eventID: String, at date: Date) async throws {
        try await base.markPublished(eventID: eventID, at: date)
    }

    public func markConsumed(paymentSeq: String, resultCode: Int, at date: Date) async throws -> Bool {
        try await base.markConsumed(paymentSeq: paymentSeq, resultCode: resultCode, at: date)
    }

    public func recordConsumeFailure(paymentSeq: String, resultCode: Int?) async throws {
        try await base.recordConsumeFailure(paymentSeq: paymentSeq, resultCode: resultCode)
    }

    public func claimUnconsumedGrants(grantedBefore: Date, limit: Int, lease: Duration, now: Date) async throws
        -> [GrantRecord]
    {
        try await base.claimUnconsumedGrants(grantedBefore: grantedBefore, limit: limit, lease: lease, now: now)
    }

    public func claimUnpublishedEvents(createdBefore: Date, limit: Int, lease: Duration, now: Date) async throws
        -> [OutboxEvent]
    {
        try await base.claimUnpublishedEvents(createdBefore: createdBefore, limit: limit, lease: lease, now: now)
    }

    public func rejections(paymentSeq: String) async throws -> [RejectionRecord] {
        try await base.rejections(paymentSeq: paymentSeq)
    }

    public func events(paymentSeq: String) async throws -> [OutboxEvent] { try await base.events(paymentSeq: paymentSeq) }
    public func stats() async throws -> LedgerStats { try await base.stats() }
    public func countUnconsumed() async throws -> Int { try await base.countUnconsumed() }
    public func oldestUnconsumedGrantedAt() async throws -> Date? { try await base.oldestUnconsumedGrantedAt() }
    public func close() async throws { try await base.close() }

    public func recordDuplicates(_ notes: [DuplicateNote]) async throws { try await base.recordDuplicates(notes) }
    public func recordDeadLetter(_ entry: DeadLetterEntry) async throws { try await base.recordDeadLetter(entry) }

    public func recordReprocessOutcome(deadLetter location: RecordLocation, outcome: String, at date: Date) async throws {
        try await base.recordReprocessOutcome(deadLetter: location, outcome: outcome, at: date)
    }

    // MARK: Reconciliation (few calls, already batched by user)

    public func reconciliationUsers(activeSince: Date, dueAt: Date?, limit: Int) async throws -> [String] {
        try await base.reconciliationUsers(activeSince: activeSince, dueAt: dueAt, limit: limit)
    }

    public func refreshReconciliationUsers(activeSince: Date) async throws -> Bool {
        try await base.refreshReconciliationUsers(activeSince: activeSince)
    }

    public func claimReconciliationUsers(_ userIds: [String], now: Date, nextCheck: Date) async throws -> [String] {
        try await base.claimReconciliationUsers(userIds, now: now, nextCheck: nextCheck)
    }

    public func reconciliationSightings(_ payments: [ReconciliationSighting], now: Date, record: Bool) async throws
        -> [String: Date]
    {
        try await base.reconciliationSightings(payments, now: now, record: record)
    }

    public func forgetReconciliationSightings(paymentSeqs: [String]) async throws {
        try await base.forgetReconciliationSightings(paymentSeqs: paymentSeqs)
    }

    public func pruneReconciliation(before: Date) async throws {
        try await base.pruneReconciliation(before: before)
    }
}

import Foundation
import Fulfilment
import Synchronization

/// A ledger whose lookups fail for some users: what one user's payments the database refuses look like to a pass.
final class RefusingLedger: LedgerStore, ReconciliationPassThrough {
    let base: any LedgerStore
    /// Users whose rejection lookups fail, as a statement the database refuses would.
    let refusedUsers = Mutex<Set<String>>([])

    init(_ base: any LedgerStore) { self.base = base }

    func migrate() async throws { try await base.migrate() }
    func grant(paymentSeq: String) async throws -> GrantRecord? { try await base.grant(paymentSeq: paymentSeq) }
    func rejection(_ key: RejectionKey) async throws -> RejectionRecord? {
        if refusedUsers.withLock({ $0.contains(key.userId) }) {
            throw LedgerError(code: .query, message: "refused for the test")
        }
        return try await base.rejection(key)
    }
    func insertGrant(_ grant: GrantRecord, event: OutboxEvent) async throws -> GrantInsertResult {
        try await base.insertGrant(grant, event: event)
    }
    func insertRejection(_ rejection: RejectionRecord, event: OutboxEvent) async throws -> Bool {
        try await base.insertRejection(rejection, event: event)
    }
    func event(id: String) async throws -> OutboxEvent? { try await base.event(id: id) }
    func markPublished(eventID: String, at date: Date) async throws {
        try await base.markPublished(eventID: eventID, at: date)
    }
    func markConsumed(paymentSeq: String, resultCode: Int, at date: Date) async throws -> Bool {
        return try await base.markConsumed(paymentSeq: paymentSeq, resultCode: resultCode, at: date)
    }
    func recordConsumeFailure(paymentSeq: String, resultCode: Int?) async throws {
        try await base.recordConsumeFailure(paymentSeq: paymentSeq, resultCode: resultCode)
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

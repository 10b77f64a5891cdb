import Foundation
import Fulfilment
import Synchronization

/// A ledger's purchases role whose lookups fail for some users: what one user's payments the database refuses look
/// like to a pass.
final class RefusingLedger: PurchaseLedger {
    let base: any PurchaseLedger
    /// Users whose lookups fail, as a statement the database refuses would.
    let refusedUsers = Mutex<Set<String>>([])

    init(_ base: any PurchaseLedger) { self.base = base }

    func lookup(_ keys: [RejectionKey]) async throws -> [LedgerLookup] {
        let refused = refusedUsers.withLock { $0 }
        if keys.contains(where: { refused.contains($0.userId) }) {
            throw LedgerError(code: .query, message: "refused for the test")
        }
        return try await base.lookup(keys)
    }

    func grant(paymentSeq: String) async throws -> GrantRecord? { try await base.grant(paymentSeq: paymentSeq) }
    func event(id: String) async throws -> OutboxEvent? { try await base.event(id: id) }
    func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult] {
        try await base.insertGrants(writes)
    }
    func insertRejections(_ writes: [RejectionWrite]) async throws -> [Bool] {
        try await base.insertRejections(writes)
    }
    func recordConsumes(_ records: [ConsumeRecord]) async throws -> [Bool] { try await base.recordConsumes(records) }
    func markPublished(_ events: [PublishedEvent]) async throws { try await base.markPublished(events) }
    func recordDuplicates(_ notes: [DuplicateNote]) async throws { try await base.recordDuplicates(notes) }
    func recordDeadLetter(_ entry: DeadLetterEntry) async throws { try await base.recordDeadLetter(entry) }
    func setAsideRevokedGrant(paymentSeq: String, at date: Date) async throws -> Bool {
        try await base.setAsideRevokedGrant(paymentSeq: paymentSeq, at: date)
    }
}

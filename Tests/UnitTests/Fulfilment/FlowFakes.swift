import Foundation
import Fulfilment
import Gamebase
import IAPTestSupport
import Synchronization

/// A real ledger's purchases role that crashes (throws) at a chosen step, once. Its other roles are read through
/// ``base``.
final class CrashingLedger: PurchaseLedger {
    enum Step: String, CaseIterable, Sendable {
        case insertGrant, markPublished, markConsumed, recordConsumeFailure
    }
    /// Writes kept for people to read (`find`), refused once when chosen: not crash points of the flow.
    enum SupportWrite: Sendable {
        case recordDuplicates, recordDeadLetter
    }
    struct Crash: Error {}

    let base: any TestLedger
    let crashAt = Mutex<Step?>(nil)
    let refuseAt = Mutex<SupportWrite?>(nil)

    init(_ base: any TestLedger) { self.base = base }

    private func maybeCrash(_ step: Step) throws {
        try crashAt.withLock { crash in
            if crash == step {
                crash = nil
                throw Crash()
            }
        }
    }

    private func maybeRefuse(_ write: SupportWrite) throws {
        try refuseAt.withLock { refuse in
            if refuse == write {
                refuse = nil
                throw Crash()
            }
        }
    }

    func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult] {
        // A crash right after the commit: the grant is durable, nothing after it ran.
        let results = try await base.insertGrants(writes)
        try maybeCrash(.insertGrant)
        return results
    }

    func markPublished(_ events: [PublishedEvent]) async throws {
        try maybeCrash(.markPublished)
        try await base.markPublished(events)
    }

    func recordConsumes(_ records: [ConsumeRecord]) async throws -> [Bool] {
        // A Consume outcome marks its event published in the same transaction: a crash before it is one before both.
        if records.contains(where: \.consumed) { try maybeCrash(.markConsumed) }
        if records.contains(where: { !$0.consumed }) { try maybeCrash(.recordConsumeFailure) }
        if records.contains(where: { $0.publishedEventID != nil }) { try maybeCrash(.markPublished) }
        return try await base.recordConsumes(records)
    }

    func recordDuplicates(_ notes: [DuplicateNote]) async throws {
        try maybeRefuse(.recordDuplicates)
        try await base.recordDuplicates(notes)
    }

    func recordDeadLetter(_ entry: DeadLetterEntry) async throws {
        try maybeRefuse(.recordDeadLetter)
        try await base.recordDeadLetter(entry)
    }

    func setAsideRevokedGrant(paymentSeq: String, at date: Date) async throws -> Bool {
        try await base.setAsideRevokedGrant(paymentSeq: paymentSeq, at: date)
    }

    func lookup(_ keys: [RejectionKey]) async throws -> [LedgerLookup] { try await base.lookup(keys) }
    func grant(paymentSeq: String) async throws -> GrantRecord? { try await base.grant(paymentSeq: paymentSeq) }
    func event(id: String) async throws -> OutboxEvent? { try await base.event(id: id) }
    func insertRejections(_ writes: [RejectionWrite]) async throws -> [Bool] {
        try await base.insertRejections(writes)
    }

    // What the tests read of the other roles.
    func stats() async throws -> LedgerStats { try await base.stats() }
    func rejections(paymentSeq: String) async throws -> [RejectionRecord] {
        try await base.rejections(paymentSeq: paymentSeq)
    }
}

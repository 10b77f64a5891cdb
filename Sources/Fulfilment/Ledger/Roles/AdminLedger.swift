import Foundation

/// The ledger's role for operators' commands: counts by state, one purchase's raw rows (`iap-worker ledger`), and what
/// `reprocess` made of a dead letter.
///
/// Every method throws ``LedgerError``.
public protocol AdminLedger: Sendable {
    /// Rows by state.
    func stats() async throws -> LedgerStats

    /// Every rejection recorded for `paymentSeq` (one per judged message).
    func rejections(paymentSeq: String) async throws -> [RejectionRecord]

    /// Every outbox event of `paymentSeq`.
    func events(paymentSeq: String) async throws -> [OutboxEvent]

    /// Records what `reprocess` made of the dead letter at `location` (nothing when the ledger never recorded it).
    func recordReprocessOutcome(deadLetter location: RecordLocation, outcome: String, at date: Date) async throws
}

import Foundation

/// The ledger's role for people (its history): what `iap-worker find` and the operator console read. The ledger's stores
/// implement it; nothing here writes. Every method throws ``LedgerError``.
public protocol HistoryLedger: Sendable {
    /// Everything the ledger holds about one paymentSeq (empty when it holds nothing).
    func history(paymentSeq: String) async throws -> PurchaseHistory

    /// The paymentSeqs whose grant, or whose rejection judged on Gamebase's answer, carries this store payment id
    /// (byte for byte), at most `limit`.
    func paymentSeqs(paymentId: String, limit: Int) async throws -> [String]

    /// A user's purchases — granted to them, claimed in their name, dead-lettered or seen by reconciliation — newest
    /// first by when each first appeared in the ledger, then by paymentSeq (its bytes); when a cursor is given, only
    /// those after it in that order (the next page: `PurchaseReference.cursor` of the last one of the page before).
    func purchases(userId: String, before cursor: PurchaseCursor?, limit: Int) async throws -> [PurchaseReference]

    /// The dead letters of the message read at `source` (a malformed message without a paymentSeq is found so).
    func deadLetters(original source: MessageSource) async throws -> [DeadLetterEntry]

    /// Recorded dead letters, newest first (failed at, then the latest recorded), of one reason when given; when a
    /// cursor is given, only those after it in that order (the next page: `DeadLetterEntry.cursor` of the last one of
    /// the page before). Each carries its ``DeadLetterEntry/ledgerID``.
    func deadLetters(reason: String?, before cursor: DeadLetterCursor?, limit: Int) async throws -> [DeadLetterEntry]
}

/// A purchase of a user's list: its paymentSeq and when it first appeared in the ledger.
public struct PurchaseReference: Sendable, Hashable {
    public var paymentSeq: String
    public var firstSeen: Date

    public init(paymentSeq: String, firstSeen: Date) {
        self.paymentSeq = paymentSeq
        self.firstSeen = firstSeen
    }
}

import Foundation

/// Where the next page of recorded dead letters starts (``HistoryLedger/deadLetters(reason:before:limit:)``): right
/// after the dead letter of ledger row `ledgerID` failed at `failedAt`, in the list's order — failed newest first,
/// then the latest recorded first — so the dead letters of the same millisecond as a page's last one are on the next
/// page, not skipped.
///
/// Without a ledger row id (a time typed by hand), the page starts with the dead letters failed before `failedAt`.
public struct DeadLetterCursor: Sendable, Hashable {
    public var failedAt: Date
    public var ledgerID: Int64?

    public init(failedAt: Date, ledgerID: Int64? = nil) {
        self.failedAt = failedAt
        self.ledgerID = ledgerID
    }
}

extension DeadLetterEntry {
    /// The cursor of the page after the one this dead letter ends (a time alone when it was not read from a ledger).
    public var cursor: DeadLetterCursor { DeadLetterCursor(failedAt: failedAt, ledgerID: ledgerID) }
}

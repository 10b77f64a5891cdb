import Foundation

/// Where the next page of a user's purchases starts (``HistoryLedger/purchases(userId:before:limit:)``): right after
/// the purchase `paymentSeq` first seen at `firstSeen`, in the list's order — first seen newest first, then by
/// paymentSeq (its bytes) — so the purchases that first appeared in the same millisecond as a page's last one are on
/// the next page, not skipped.
///
/// Without a paymentSeq (a time typed by hand), the page starts with the purchases first seen before `firstSeen`.
public struct PurchaseCursor: Sendable, Hashable {
    public var firstSeen: Date
    public var paymentSeq: String?

    public init(firstSeen: Date, paymentSeq: String? = nil) {
        self.firstSeen = firstSeen
        self.paymentSeq = paymentSeq
    }
}

extension PurchaseReference {
    /// The cursor of the page after the one this purchase ends.
    public var cursor: PurchaseCursor { PurchaseCursor(firstSeen: firstSeen, paymentSeq: paymentSeq) }
}

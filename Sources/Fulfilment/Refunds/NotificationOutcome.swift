/// What recording a store notification did: kept with the notification in the ledger, counted as the `result` of
/// `iap_store_notifications_total`.
public enum NotificationOutcome: String, Sendable, Hashable, CaseIterable {
    /// A refund matched to a grant: the grant is revoked and an item-revoked event published.
    case revoked
    /// A refund of a payment refunded already by an earlier notification (its grant revoked, or its refund pending):
    /// nothing new.
    case alreadyRefunded = "already_refunded"
    /// A refund of a payment the ledger has not granted: kept, and the purchase is rejected as `refunded` when it comes.
    case pending
    /// A reversal matched: a revocation undone (a refund-reversed event), or a pending refund cancelled before any grant.
    case reversed
    /// A refund or reversal that names no payment, or a reversal with nothing to reverse: kept for people to read.
    case unmatched
    /// A declined refund, a consumption request or another notification: kept, nothing changes.
    case recorded
}

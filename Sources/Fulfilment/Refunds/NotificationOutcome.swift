/// What recording a store notification did: kept with the notification in the ledger, counted as the `result` of
/// `iap_store_notifications_total`.
public enum NotificationOutcome: String, Sendable, Hashable, CaseIterable {
    /// A refund matched to a grant: the grant is revoked and an item-revoked event published.
    case revoked
    /// A refund of a payment refunded already (its grant revoked, or its refund pending), or a partial refund whose units
    /// went with a whole refund that stands: nothing new.
    case alreadyRefunded = "already_refunded"
    /// A refund of a payment the ledger has not granted: kept, and the purchase is rejected as `refunded` when it comes.
    /// At most one refund of a payment is `pending`: the latest whole refund, while no reversal follows it.
    case pending
    /// A partial refund of a payment the ledger has not granted: the purchase is granted when it comes, and the partial
    /// revocation follows (the sweeper settles it).
    case pendingPartial = "pending_partial"
    /// A reversal matched: a revocation undone (a refund-reversed event), or a pending refund cancelled before any grant;
    /// or a refund that a reversal later by the store's times undid.
    case reversed
    /// A refund or reversal that names no payment, or a reversal with nothing to reverse (no revocation stands, or a
    /// later refund stands by the store's times): kept for people to read.
    case unmatched
    /// A declined refund, a consumption request or another notification: kept, nothing changes.
    case recorded
}

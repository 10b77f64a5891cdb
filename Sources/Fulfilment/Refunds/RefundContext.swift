import Foundation

/// What the ledger holds about a notification's payment, read inside the transaction that records the notification
/// (under the payment's lock on PostgreSQL, so a grant of the same payment cannot slip in between).
public struct RefundContext: Sendable, Hashable {
    /// The grant of the payment (matched by store code and store payment id).
    public var grant: GrantRecord?
    /// That grant's revocation, if any.
    public var revocation: RevocationRecord?
    /// The id of a refund of the payment kept while no grant exists (outcome `pending`).
    public var pendingRefund: String?
    /// When the latest reversal of the payment recorded with nothing to reverse happened (the store's time): one that
    /// came before its refund.
    public var unmatchedReversalAt: Date?

    public init(
        grant: GrantRecord? = nil, revocation: RevocationRecord? = nil, pendingRefund: String? = nil,
        unmatchedReversalAt: Date? = nil
    ) {
        self.grant = grant
        self.revocation = revocation
        self.pendingRefund = pendingRefund
        self.unmatchedReversalAt = unmatchedReversalAt
    }
}

import Foundation

/// What the ledger holds about a notification's payment, read inside the transaction that records the notification
/// (under the payment's lock on PostgreSQL, so a grant of the same payment cannot slip in between).
public struct RefundContext: Sendable, Hashable {
    /// The grant of the payment (matched by store code and store payment id).
    public var grant: GrantRecord?
    /// That grant's revocations, by number.
    public var revocations: [RevocationRecord]
    /// The refunds and reversals of the payment recorded so far, whatever their outcome: the store's word that the
    /// payment's state is decided from (``RefundPlan``).
    public var notices: [StoreNotificationRecord]

    public init(
        grant: GrantRecord? = nil, revocations: [RevocationRecord] = [], notices: [StoreNotificationRecord] = []
    ) {
        self.grant = grant
        self.revocations = revocations.sorted { $0.number < $1.number }
        self.notices = notices
    }
}

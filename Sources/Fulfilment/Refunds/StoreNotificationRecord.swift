import Foundation

/// A store notification as the ledger keeps it: what the store said, how it came, and what it did.
public struct StoreNotificationRecord: Sendable, Hashable {
    public var notification: StoreNotification
    public var channel: NotificationChannel
    /// When the worker read it.
    public var receivedAt: Date
    /// What recording it did (set by the ledger when it records it).
    public var outcome: NotificationOutcome
    /// The grant it was matched to, if any.
    public var paymentSeq: String?

    public init(
        notification: StoreNotification, channel: NotificationChannel, receivedAt: Date,
        outcome: NotificationOutcome = .recorded, paymentSeq: String? = nil
    ) {
        self.notification = notification
        self.channel = channel
        self.receivedAt = receivedAt
        self.outcome = outcome
        self.paymentSeq = paymentSeq
    }

    /// The key by which a refund is matched to a grant: Gamebase's store code and the store payment id.
    public var paymentKey: StorePaymentKey? {
        notification.paymentId.map { StorePaymentKey(marketId: notification.store.marketId, paymentId: $0) }
    }
}

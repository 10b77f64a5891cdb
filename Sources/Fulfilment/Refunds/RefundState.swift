import Foundation

/// A payment's refund state by the store's own times (DESIGN §4), from every refund and reversal of it the ledger
/// holds: the order they were read in plays no part.
///
/// A whole refund stands when no reversal at or after its time follows it; the payment is refunded when its latest whole
/// refund stands. A reversal undoes the latest whole refund before it (stores reverse a refund, never a part of one).
/// Partial refunds each take back their units once, and stay taken back whatever whole refunds and reversals come.
struct RefundState {
    /// The latest whole refund, by the store's time (then by notification id, so that ties decide alike everywhere).
    let latestRefund: StoreNotificationRecord?
    /// The latest reversal.
    let latestReversal: StoreNotificationRecord?
    /// The partial refunds, earliest first.
    let partials: [StoreNotificationRecord]

    init(_ notices: [StoreNotificationRecord]) {
        func later(_ a: StoreNotificationRecord, _ b: StoreNotificationRecord) -> Bool {
            (a.notification.occurredAt, a.notification.notificationId)
                > (b.notification.occurredAt, b.notification.notificationId)
        }
        func latest(_ records: [StoreNotificationRecord]) -> StoreNotificationRecord? {
            records.reduce(nil) { best, next in best.map { later(next, $0) ? next : $0 } ?? next }
        }
        let refunds = notices.filter { $0.notification.kind == .refund }
        latestRefund = latest(refunds.filter { !$0.notification.isPartialRefund })
        latestReversal = latest(notices.filter { $0.notification.kind == .refundReversed })
        partials = refunds.filter(\.notification.isPartialRefund).sorted { later($1, $0) }
    }

    /// Whether the payment is refunded as a whole now.
    var refunded: Bool {
        guard let latestRefund else { return false }
        return !reversed(latestRefund)
    }

    /// Whether a reversal at or after `refund`'s time undid it.
    func reversed(_ refund: StoreNotificationRecord) -> Bool {
        guard let latestReversal else { return false }
        return latestReversal.notification.occurredAt >= refund.notification.occurredAt
    }
}

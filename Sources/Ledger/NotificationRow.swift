import Foundation
import Fulfilment

/// The rows of `store_notifications` and `revocations` as both stores read them, and the records they make: the enums'
/// stored names are checked once here (a row written by a newer version with a name this one does not know is an
/// error that says which, never a guess).
struct NotificationRow {
    var notificationId: String
    var store: String
    var kind: String
    var storeType: String
    var authenticity: String
    var channel: String
    var deliveryId: String?
    var paymentId: String?
    var purchaseTokenHash: String?
    var application: String?
    var environment: String?
    var productId: String?
    var storeReason: String?
    var quantity: Int64?
    var occurredAtMilliseconds: Int64
    var receivedAtMilliseconds: Int64
    var outcome: String
    var paymentSeq: String?

    func record() throws(LedgerError) -> StoreNotificationRecord {
        guard let store = Store(rawValue: store), let kind = StoreNotification.Kind(rawValue: kind),
            let authenticity = StoreNotification.Authenticity(rawValue: authenticity),
            let channel = NotificationChannel(rawValue: channel), let outcome = NotificationOutcome(rawValue: outcome)
        else {
            throw LedgerError(
                code: .query,
                message: "store notification \(notificationId) has a store, kind or outcome this version does not know")
        }
        let notification = StoreNotification(
            store: store, kind: kind, storeType: storeType, notificationId: notificationId,
            authenticity: authenticity, deliveryId: deliveryId, paymentId: paymentId,
            purchaseTokenHash: purchaseTokenHash, application: application, environment: environment,
            productId: productId, reason: storeReason, quantity: quantity.map { Int(clamping: $0) },
            occurredAt: Date(epochMilliseconds: occurredAtMilliseconds))
        return StoreNotificationRecord(
            notification: notification, channel: channel,
            receivedAt: Date(epochMilliseconds: receivedAtMilliseconds), outcome: outcome, paymentSeq: paymentSeq)
    }
}

extension NotificationRow {
    /// A count of the console's refunds page from its row (`day` in days since the epoch); `nil` for a kind or outcome
    /// this version does not know (a newer version's), which the page leaves out rather than failing.
    static func dayCount(day: Int64, kind: String, outcome: String, count: Int64) -> RefundDayCount? {
        guard let kind = StoreNotification.Kind(rawValue: kind), let outcome = NotificationOutcome(rawValue: outcome)
        else { return nil }
        return RefundDayCount(
            day: Date(epochMilliseconds: day * RefundDayCount.dayMilliseconds), kind: kind, outcome: outcome,
            count: Int(clamping: count))
    }
}

extension StoreNotificationRecord {
    /// The record as written: with the plan's outcome and grant.
    func planned(_ plan: RefundPlan) -> StoreNotificationRecord {
        var record = self
        record.outcome = plan.outcome
        record.paymentSeq = plan.paymentSeq
        return record
    }
}

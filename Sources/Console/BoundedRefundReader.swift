import Foundation
import Fulfilment

/// The ledger's refund reads as the console uses them: under the same deadlines and the same count of reads at once as
/// ``BoundedHistoryReader``'s (one budget of the ledger's connections for every page).
struct BoundedRefundReader: RefundHistoryLedger {
    let base: any RefundHistoryLedger
    let bounds: BoundedHistoryReader

    func notifications(paymentKey: StorePaymentKey) async throws -> [StoreNotificationRecord] {
        try await bounds.bounded("notifications of a payment") { [base] in
            try await base.notifications(paymentKey: paymentKey)
        }
    }

    func notification(id: String) async throws -> StoreNotificationRecord? {
        try await bounds.bounded("notification lookup") { [base] in try await base.notification(id: id) }
    }

    func revocations(paymentSeq: String) async throws -> [RevocationRecord] {
        try await bounds.bounded("revocations of a grant") { [base] in
            try await base.revocations(paymentSeq: paymentSeq)
        }
    }

    func consumptionAnswer(notificationId: String) async throws -> ConsumptionAnswer? {
        try await bounds.bounded("consumption answer") { [base] in
            try await base.consumptionAnswer(notificationId: notificationId)
        }
    }

    func latestRefunds(limit: Int) async throws -> [RefundListing] {
        try await bounds.bounded("latest refunds") { [base] in try await base.latestRefunds(limit: limit) }
    }

    func refundCounts(since: Date) async throws -> [RefundDayCount] {
        try await bounds.bounded("refund counts") { [base] in try await base.refundCounts(since: since) }
    }

    func refundingUsers(since: Date, limit: Int) async throws -> [RefundingUser] {
        try await bounds.bounded("users with refunds") { [base] in
            try await base.refundingUsers(since: since, limit: limit)
        }
    }

    func refusals(limit: Int) async throws -> [RefusedNotification] {
        try await bounds.bounded("refused notifications") { [base] in try await base.refusals(limit: limit) }
    }

    func refusals(claimedId: String, limit: Int) async throws -> [RefusedNotification] {
        try await bounds.bounded("refused notifications") { [base] in
            try await base.refusals(claimedId: claimedId, limit: limit)
        }
    }
}

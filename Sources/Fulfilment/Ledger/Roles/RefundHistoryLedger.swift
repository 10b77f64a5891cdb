import Foundation

/// The ledger's refunds as people read them: `iap-worker find` and the operator console. Nothing here writes; every
/// method throws ``LedgerError``. ``RefundLedger`` (the workers' role) reads the same.
public protocol RefundHistoryLedger: Sendable {
    /// The notifications recorded for a payment (matched or naming it), oldest first.
    func notifications(paymentKey: StorePaymentKey) async throws -> [StoreNotificationRecord]

    /// A notification by its id.
    func notification(id: String) async throws -> StoreNotificationRecord?

    /// The revocations of a grant, by number (none when it was never revoked).
    func revocations(paymentSeq: String) async throws -> [RevocationRecord]

    /// The answer of a consumption request, if one was tried.
    func consumptionAnswer(notificationId: String) async throws -> ConsumptionAnswer?

    /// The refunds, reversals and declined refunds recorded (``StoreNotification/Kind/isRefund``), latest received
    /// first (then by notification id), at most `limit`; each with the user of the grant it was matched to, if any.
    func latestRefunds(limit: Int) async throws -> [RefundListing]

    /// The refunds, reversals and declined refunds received at or after `since`, counted by UTC day, kind and outcome.
    func refundCounts(since: Date) async throws -> [RefundDayCount]

    /// The users whose grants were revoked at or after `since` (by when the worker recorded it): the most revocations
    /// first, then by userId; at most `limit`.
    func refundingUsers(since: Date, limit: Int) async throws -> [RefundingUser]

    /// The refused records, latest first, at most `limit`: why, and where each last came from.
    func refusals(limit: Int) async throws -> [RefusedNotification]

    /// The refused records that claimed the notification id `claimedId` (``RefusedNotification/claimedId``), latest
    /// first, at most `limit`.
    func refusals(claimedId: String, limit: Int) async throws -> [RefusedNotification]
}

extension RefundHistoryLedger {
    /// A grant's first revocation, if any.
    public func revocation(paymentSeq: String) async throws -> RevocationRecord? {
        try await revocations(paymentSeq: paymentSeq).first
    }
}

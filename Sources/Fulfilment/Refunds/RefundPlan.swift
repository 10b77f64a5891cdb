import Foundation

/// What recording one store notification writes, decided once here for every ledger: each store reads the
/// ``RefundContext`` and carries the plan out in the same transaction.
public struct RefundPlan: Sendable, Hashable {
    /// The notification's outcome, kept with it.
    public var outcome: NotificationOutcome
    /// The grant it concerns, if one matched.
    public var paymentSeq: String?
    /// A revocation to insert (one per grant: the insert is guarded by the grant's paymentSeq).
    public var revocation: RevocationRecord?
    /// A revocation undone: the row as it is after the reversal.
    public var reversal: RevocationRecord?
    /// A pending refund this reversal cancels before any grant: its outcome becomes `reversed`, and the purchase may be
    /// granted again — the `refunded` rejections of its payment are removed with it, so the purchase's message sent
    /// again (or the reconciler) is judged afresh instead of answered by that rejection.
    public var cancelledRefund: String?
    /// Outbox events, written in the same transaction.
    public var events: [OutboxEvent]

    public init(
        outcome: NotificationOutcome, paymentSeq: String? = nil, revocation: RevocationRecord? = nil,
        reversal: RevocationRecord? = nil, cancelledRefund: String? = nil, events: [OutboxEvent] = []
    ) {
        self.outcome = outcome
        self.paymentSeq = paymentSeq
        self.revocation = revocation
        self.reversal = reversal
        self.cancelledRefund = cancelledRefund
        self.events = events
    }

    /// Decides what `record` does, given what the ledger holds about its payment.
    ///
    /// - A refund of a granted payment revokes the grant once (a second refund of it, under another notification id,
    ///   changes nothing); a refund of a payment not granted is kept `pending`, which turns the purchase into a
    ///   `refunded` rejection when it comes.
    /// - A reversal undoes the grant's revocation (a refund-reversed event), or cancels a pending refund; one with
    ///   nothing to reverse yet is kept `unmatched`, and the refund it undid, when it comes, is recorded `reversed`.
    /// - Anything else is recorded and changes nothing.
    public static func decide(
        _ record: StoreNotificationRecord, context: RefundContext, events: EventFactory, now: Date
    ) -> RefundPlan {
        let notification = record.notification
        switch notification.kind {
        case .refund:
            guard record.paymentKey != nil else { return RefundPlan(outcome: .unmatched) }
            // Its reversal came first (Apple's types are read apart, and a long backfill or a failed page can read a
            // REFUND_REVERSED before its REFUND): a refund a later reversal undid takes nothing back. A refund after
            // that reversal (a new one) revokes as any other.
            if let reversedAt = context.unmatchedReversalAt, reversedAt >= notification.occurredAt {
                return RefundPlan(outcome: .reversed, paymentSeq: context.grant?.paymentSeq)
            }
            guard let grant = context.grant else {
                if context.pendingRefund != nil { return RefundPlan(outcome: .alreadyRefunded) }
                return RefundPlan(outcome: .pending)
            }
            if context.revocation != nil { return RefundPlan(outcome: .alreadyRefunded, paymentSeq: grant.paymentSeq) }
            let revocation = RevocationRecord(
                paymentSeq: grant.paymentSeq, userId: grant.userId, store: notification.store,
                notificationId: notification.notificationId, reason: RevocationRecord.reason(of: notification),
                storeReason: notification.reason, quantity: notification.quantity,
                revokedAt: notification.occurredAt, recordedAt: now)
            return RefundPlan(
                outcome: .revoked, paymentSeq: grant.paymentSeq, revocation: revocation,
                events: [events.itemRevoked(grant, revocation, channel: record.channel, at: now)])
        case .refundReversed:
            if let grant = context.grant, var revocation = context.revocation, revocation.reversedBy == nil {
                revocation.reversedBy = notification.notificationId
                revocation.reversedAt = notification.occurredAt
                return RefundPlan(
                    outcome: .reversed, paymentSeq: grant.paymentSeq, reversal: revocation,
                    events: [
                        events.refundReversed(
                            grant, revocation, notification: notification, channel: record.channel, at: now)
                    ])
            }
            if context.grant == nil, let pending = context.pendingRefund {
                return RefundPlan(outcome: .reversed, cancelledRefund: pending)
            }
            return RefundPlan(outcome: .unmatched, paymentSeq: context.grant?.paymentSeq)
        case .refundDeclined, .consumptionRequest, .other:
            return RefundPlan(outcome: .recorded, paymentSeq: context.grant?.paymentSeq)
        }
    }
}

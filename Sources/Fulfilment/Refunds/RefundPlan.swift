import Foundation

/// What recording one store notification writes, decided once here for every ledger: each store reads the
/// ``RefundContext`` and carries the plan out in the same transaction.
///
/// The plan moves what the ledger has done about the payment — its grant's revocations, the `pending` mark a purchase
/// not granted yet is refused by — to what the store's word says by its own times (``RefundState``), so the order
/// notifications are read in never changes where a payment ends (DESIGN §4).
public struct RefundPlan: Sendable, Hashable {
    /// The recorded notification's outcome, kept with it.
    public var outcome: NotificationOutcome
    /// The grant it concerns, if one matched.
    public var paymentSeq: String?
    /// Revocations to insert, numbered after the grant's last one.
    public var revocations: [RevocationRecord]
    /// Revocations undone: the rows as they are after the reversal.
    public var reversals: [RevocationRecord]
    /// Other notifications of the payment whose outcome changes with this one: a refund no longer `pending` (or newly
    /// so), a pending one settled beside a grant. Each with the paymentSeq it then names.
    public var settled: [Settlement]
    /// The payment stopped being refunded before any grant: its `refunded` rejections are removed, so the purchase's
    /// message sent again (or the reconciler) is judged afresh instead of answered by them.
    public var clearsRefundedRejections: Bool
    /// Outbox events, written in the same transaction.
    public var events: [OutboxEvent]

    /// The grant is no longer revoked as a whole: if it was set aside (Gamebase refused Consume of the revoked grant:
    /// ``PurchaseLedger/setAsideRevokedGrant(paymentSeq:at:)``), it waits for Consume again.
    public var resumesConsume: Bool { !reversals.isEmpty }

    /// A notification's new outcome.
    public struct Settlement: Sendable, Hashable {
        public var notificationId: String
        public var outcome: NotificationOutcome
        public var paymentSeq: String?

        public init(notificationId: String, outcome: NotificationOutcome, paymentSeq: String?) {
            self.notificationId = notificationId
            self.outcome = outcome
            self.paymentSeq = paymentSeq
        }
    }

    public init(
        outcome: NotificationOutcome, paymentSeq: String? = nil, revocations: [RevocationRecord] = [],
        reversals: [RevocationRecord] = [], settled: [Settlement] = [], clearsRefundedRejections: Bool = false,
        events: [OutboxEvent] = []
    ) {
        self.outcome = outcome
        self.paymentSeq = paymentSeq
        self.revocations = revocations
        self.reversals = reversals
        self.settled = settled
        self.clearsRefundedRejections = clearsRefundedRejections
        self.events = events
    }

    /// Decides what recording `record` does, given what the ledger holds about its payment.
    ///
    /// - Granted payment: when the payment is refunded as a whole and no revocation of the grant stands, the latest
    ///   whole refund revokes it (item-revoked, numbered); when it no longer is and one stands, the latest reversal
    ///   undoes it (refund-reversed, the revocation's number); while it is not refunded as a whole, each partial refund
    ///   not yet revoked revokes its units. Anything else changes nothing.
    /// - Payment not granted: the latest whole refund is `pending` while it stands (the purchase is refused as
    ///   `refunded` when it comes); when none stands any more, the `refunded` rejections go. A partial refund is
    ///   `pending_partial`: the purchase is granted, then the refund settled.
    /// - Any other notification is recorded and changes nothing.
    public static func decide(
        _ record: StoreNotificationRecord, context: RefundContext, events: EventFactory, now: Date
    ) -> RefundPlan {
        switch record.notification.kind {
        case .refund, .refundReversed:
            guard record.paymentKey != nil else { return RefundPlan(outcome: .unmatched) }
            let others = context.notices.filter {
                $0.notification.notificationId != record.notification.notificationId
            }
            var plan = plan(deciding: [record], others: others, context: context, events: events, now: now)
            let own = plan.settled.first { $0.notificationId == record.notification.notificationId }
            plan.settled.removeAll { $0.notificationId == record.notification.notificationId }
            plan.outcome = own?.outcome ?? .recorded
            plan.paymentSeq = context.grant?.paymentSeq
            return plan
        case .refundDeclined, .consumptionRequest, .other:
            return RefundPlan(outcome: .recorded, paymentSeq: context.grant?.paymentSeq)
        }
    }

    /// Settles the payment's refunds still `pending` or `pending_partial` (``NotificationOutcome``) now that a grant of
    /// it exists, as if each had come after the grant: the sweeper's late match. `nil` when none is.
    public static func settle(context: RefundContext, events: EventFactory, now: Date) -> RefundPlan? {
        guard context.grant != nil else { return nil }
        let pending = context.notices.filter { $0.outcome == .pending || $0.outcome == .pendingPartial }
        guard !pending.isEmpty else { return nil }
        let ids = Set(pending.map(\.notification.notificationId))
        let others = context.notices.filter { !ids.contains($0.notification.notificationId) }
        var plan = plan(deciding: pending, others: others, context: context, events: events, now: now)
        plan.outcome = plan.settled.first?.outcome ?? .recorded
        plan.paymentSeq = context.grant?.paymentSeq
        return plan
    }

    /// The plan that moves the payment to its state by the store's times, with the outcomes of `deciding` (and of any
    /// other notification whose outcome changes) in `settled`.
    private static func plan(
        deciding: [StoreNotificationRecord], others: [StoreNotificationRecord], context: RefundContext,
        events: EventFactory, now: Date
    ) -> RefundPlan {
        let notices = others + deciding
        let state = RefundState(notices)
        var plan = RefundPlan(outcome: .recorded)
        var outcomes: [String: NotificationOutcome] = [:]
        if let grant = context.grant {
            var number = (context.revocations.map(\.number).max() ?? 0) + 1
            let standing = context.revocations.last { !$0.isPartial && $0.reversedBy == nil }
            var revokedBy: String?
            var reversedBy: String?
            if state.refunded, standing == nil, let refund = state.latestRefund {
                let revocation = RevocationRecord(grant, refund, number: number, now: now)
                number += 1
                plan.revocations.append(revocation)
                plan.events.append(events.itemRevoked(grant, revocation, channel: refund.channel, at: now))
                revokedBy = refund.notification.notificationId
            }
            if !state.refunded, var revocation = standing, let reversal = state.latestReversal {
                revocation.reversedBy = reversal.notification.notificationId
                revocation.reversedAt = reversal.notification.occurredAt
                plan.reversals.append(revocation)
                plan.events.append(
                    events.refundReversed(
                        grant, revocation, notification: reversal.notification, channel: reversal.channel, at: now))
                reversedBy = reversal.notification.notificationId
            }
            var partiallyRevoked = Set(context.revocations.filter(\.isPartial).map(\.notificationId))
            if !state.refunded {
                for partial in state.partials where !partiallyRevoked.contains(partial.notification.notificationId) {
                    let revocation = RevocationRecord(grant, partial, number: number, now: now)
                    number += 1
                    plan.revocations.append(revocation)
                    plan.events.append(events.itemRevoked(grant, revocation, channel: partial.channel, at: now))
                    partiallyRevoked.insert(partial.notification.notificationId)
                }
            }
            for record in deciding + others.filter({ $0.outcome == .pending || $0.outcome == .pendingPartial }) {
                let id = record.notification.notificationId
                switch record.notification.kind {
                case .refund where record.notification.isPartialRefund:
                    outcomes[id] = partiallyRevoked.contains(id) ? .revoked : .alreadyRefunded
                case .refund:
                    outcomes[id] = id == revokedBy ? .revoked : state.reversed(record) ? .reversed : .alreadyRefunded
                default:
                    outcomes[id] = id == reversedBy ? .reversed : .unmatched
                }
            }
        } else {
            let wasPending = others.contains { $0.outcome == .pending }
            let pending = state.refunded ? state.latestRefund?.notification.notificationId : nil
            for record in deciding + others.filter({ $0.outcome == .pending }) {
                let id = record.notification.notificationId
                switch record.notification.kind {
                case .refund where record.notification.isPartialRefund:
                    outcomes[id] = .pendingPartial
                case .refund:
                    outcomes[id] = id == pending ? .pending : state.reversed(record) ? .reversed : .alreadyRefunded
                default:
                    let cancels =
                        wasPending && !state.refunded && id == state.latestReversal?.notification.notificationId
                    outcomes[id] = cancels ? .reversed : .unmatched
                }
            }
            // The latest refund may be one read before, now pending again (a later reversal's refund read after it).
            if let pending, outcomes[pending] == nil { outcomes[pending] = .pending }
            plan.clearsRefundedRejections = wasPending && !state.refunded
        }
        let previous = Dictionary(
            notices.map { ($0.notification.notificationId, $0.outcome) }, uniquingKeysWith: { first, _ in first })
        let deciding = Set(deciding.map(\.notification.notificationId))
        plan.settled = outcomes.filter { deciding.contains($0.key) || previous[$0.key] != $0.value }
            .map { Settlement(notificationId: $0.key, outcome: $0.value, paymentSeq: context.grant?.paymentSeq) }
            .sorted { $0.notificationId < $1.notificationId }
        return plan
    }
}

extension RevocationRecord {
    /// The revocation of `grant` that `refund` makes, numbered `number`.
    init(_ grant: GrantRecord, _ refund: StoreNotificationRecord, number: Int, now: Date) {
        let notification = refund.notification
        self.init(
            paymentSeq: grant.paymentSeq, number: number, userId: grant.userId, store: notification.store,
            notificationId: notification.notificationId, reason: Self.reason(of: notification),
            storeReason: notification.reason, quantity: notification.quantity, revokedAt: notification.occurredAt,
            recordedAt: now)
    }
}

import Foundation

/// What ``RefundLedger/record(_:events:now:)`` did.
public struct RefundRecording: Sendable, Hashable {
    /// The notification's outcome (for a duplicate, the one recorded the first time).
    public var outcome: NotificationOutcome
    /// Whether the notification id was recorded already (nothing was written).
    public var duplicate: Bool
    public var paymentSeq: String?
    /// Events written to the outbox, to publish now (the sweeper publishes any a crash leaves behind).
    public var events: [OutboxEvent]
    /// The revocations it made (counted in `iap_revocations_total`): the recorded notification's, or a pending partial
    /// refund's it settled.
    public var revocations: [RevocationRecord]

    public init(
        outcome: NotificationOutcome, duplicate: Bool, paymentSeq: String? = nil, events: [OutboxEvent] = [],
        revocations: [RevocationRecord] = []
    ) {
        self.outcome = outcome
        self.duplicate = duplicate
        self.paymentSeq = paymentSeq
        self.events = events
        self.revocations = revocations
    }

    /// What carrying `plan` out did.
    public init(_ plan: RefundPlan) {
        self.init(
            outcome: plan.outcome, duplicate: false, paymentSeq: plan.paymentSeq, events: plan.events,
            revocations: plan.revocations)
    }
}

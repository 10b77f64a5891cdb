import Foundation

/// The ledger's role for the stores' refunds: each notification recorded once (by its notification id) and carried
/// out by its ``RefundPlan`` in the same transaction — a revocation and its outbox event, a reversal, a pending refund
/// that the grant path then honours (``PurchaseLedger/insertGrants(_:)`` answers `.refunded`).
///
/// On PostgreSQL a notification and a grant of the same payment take the same transaction-scoped lock (the store code
/// and payment id, hashed), so a refund recorded while the purchase is being granted is seen by one side or the
/// other: never a pending refund beside a grant it missed.
///
/// Every method throws ``LedgerError``.
public protocol RefundLedger: Sendable {
    /// Records `record` (its outcome and paymentSeq are the plan's) and carries out what ``RefundPlan/decide`` decides
    /// from the ledger's state, in one transaction. A notification id recorded already changes nothing and answers
    /// `duplicate` with the outcome it had.
    func record(_ record: StoreNotificationRecord, events: EventFactory, now: Date) async throws -> RefundRecording

    /// The notifications recorded for a payment (matched or naming it), oldest first.
    func notifications(paymentKey: StorePaymentKey) async throws -> [StoreNotificationRecord]

    /// A notification by its id.
    func notification(id: String) async throws -> StoreNotificationRecord?

    /// The revocation of a grant, if any.
    func revocation(paymentSeq: String) async throws -> RevocationRecord?

    /// Keeps a refused record: the first of its body inserted, a repeat counted (`count`, `lastReceivedAt`).
    func recordRefusal(_ refusal: RefusedNotification) async throws

    /// The refused records, latest first, at most `limit`.
    func refusals(limit: Int) async throws -> [RefusedNotification]
}

/// What ``RefundLedger/record(_:events:now:)`` did.
public struct RefundRecording: Sendable, Hashable {
    /// The notification's outcome (for a duplicate, the one recorded the first time).
    public var outcome: NotificationOutcome
    /// Whether the notification id was recorded already (nothing was written).
    public var duplicate: Bool
    public var paymentSeq: String?
    /// Events written to the outbox, to publish now (the sweeper publishes any a crash leaves behind).
    public var events: [OutboxEvent]

    public init(outcome: NotificationOutcome, duplicate: Bool, paymentSeq: String? = nil, events: [OutboxEvent] = []) {
        self.outcome = outcome
        self.duplicate = duplicate
        self.paymentSeq = paymentSeq
        self.events = events
    }
}

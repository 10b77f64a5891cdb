import Gamebase

/// How one message ended. The engine stores the offset for every outcome but `.stop(durable: false)` and
/// `.gamebaseUnavailable` (which it either dead-letters or holds while the circuit is open).
public enum PurchaseOutcome: Sendable, Equatable {
    /// Granted now. `consumePending`: Consume has not succeeded yet; the sweeper retries it.
    case granted(paymentSeq: String, consumePending: Bool)
    /// Nothing new: granted (and now finished) or rejected before.
    case duplicate(paymentSeq: String)
    /// Judged not grantable; a consume-failed event was published.
    case rejected(paymentSeq: String, reason: ConsumeFailureReason)
    /// Not a valid purchase message; consume-failed and dead-letter records were published.
    case malformed(problem: String)
    /// Nothing was decided: Gamebase kept failing transiently after the retries or, for a payment found by
    /// reconciliation only (``PurchaseOrigin/reconciliation``), answered Get Payment Transaction with an error code
    /// rather than a payment to judge (a message's claim is rejected on such a code; a listed payment is retried).
    case gamebaseUnavailable(GamebaseError, attempts: Int)
    /// Gamebase says the deployment is wrong (secret key, app id…): stop consuming and alert.
    /// `durable`: this message's outcome was recorded anyway (its offset may be stored).
    case stop(GamebaseError, durable: Bool)

    /// The outcomes `iap_purchases_total{outcome}` counts (DESIGN §7), in the order people read them.
    public static let countedLabels = ["granted", "duplicate", "rejected", "dead_lettered", "malformed"]

    /// The `outcome` label of `iap_purchases_total`.
    public var metricLabel: String {
        switch self {
        case .granted: "granted"
        case .duplicate: "duplicate"
        case .rejected: "rejected"
        case .malformed: "malformed"
        case .gamebaseUnavailable: "unavailable"
        case .stop: "stopped"
        }
    }
}

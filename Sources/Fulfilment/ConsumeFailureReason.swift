/// The `reason` of a consume-failed event and the `iap-reason` of a dead-letter record (DESIGN §2).
public enum ConsumeFailureReason: String, Sendable, Hashable, CaseIterable, Codable {
    case malformedMessage = "malformed_message"
    case invalidPurchase = "invalid_purchase"
    case paymentMismatch = "payment_mismatch"
    case userMismatch = "user_mismatch"
    case notConsumable = "not_consumable"
    case consumedWithoutGrant = "consumed_without_grant"
    case testPurchase = "test_purchase"
    case gamebaseUnavailable = "gamebase_unavailable"
    case consumeRejected = "consume_rejected"
    /// The store refunded the payment before it was granted: it is never granted (nor consumed).
    case refunded
    /// Dead-letter records only: the worker itself failed.
    case internalError = "internal_error"

    /// Whether sending the same message again later may succeed.
    public var isRetryable: Bool {
        switch self {
        case .gamebaseUnavailable, .internalError, .consumeRejected: true
        default: false
        }
    }
}

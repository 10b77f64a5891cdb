import Foundation

/// A grant taken back because its payment was refunded: at most one per grant (`paymentSeq`), ever. A money record,
/// kept as long as grants.
public struct RevocationRecord: Sendable, Hashable {
    public var paymentSeq: String
    public var userId: String
    public var store: Store
    /// The refund notification that revoked it.
    public var notificationId: String
    /// `refund`, or `partial_refund` when the store takes back part of a quantity.
    public var reason: String
    /// The store's own reason code (Apple's `revocationReason`, Google's `refundType`).
    public var storeReason: String?
    /// How many units a partial refund takes back.
    public var quantity: Int?
    /// When the store says the refund happened.
    public var revokedAt: Date
    /// When the worker recorded it.
    public var recordedAt: Date
    /// The reversal that undid it, if any.
    public var reversedBy: String?
    public var reversedAt: Date?

    public init(
        paymentSeq: String, userId: String, store: Store, notificationId: String, reason: String,
        storeReason: String? = nil, quantity: Int? = nil, revokedAt: Date, recordedAt: Date, reversedBy: String? = nil,
        reversedAt: Date? = nil
    ) {
        self.paymentSeq = paymentSeq
        self.userId = userId
        self.store = store
        self.notificationId = notificationId
        self.reason = reason
        self.storeReason = storeReason
        self.quantity = quantity
        self.revokedAt = revokedAt
        self.recordedAt = recordedAt
        self.reversedBy = reversedBy
        self.reversedAt = reversedAt
    }

    /// Google's name of its quantity-based partial refund (`refundType` 2), as ``StoreNotification/reason`` keeps it.
    public static let googlePartialRefund = "REFUND_TYPE_QUANTITY_BASED_PARTIAL_REFUND"

    /// The `reason` of a refund: Google's quantity-based partial refund takes back part of a purchase; anything else
    /// takes it all.
    public static func reason(of notification: StoreNotification) -> String {
        notification.store == .google && notification.reason == googlePartialRefund ? "partial_refund" : "refund"
    }
}

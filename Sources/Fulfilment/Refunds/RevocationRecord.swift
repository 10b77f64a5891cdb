import Foundation

/// A grant taken back, whole or in part, because its payment was refunded. A grant's revocations are numbered 1, 2, …
/// in the order the ledger records them: a refund after a reversal, or each partial refund, is a revocation of its own
/// (DESIGN §2, §4). At most one whole revocation of a grant stands (is not reversed) at a time. Money records, kept as
/// long as grants.
public struct RevocationRecord: Sendable, Hashable {
    public var paymentSeq: String
    /// 1 for a grant's first revocation, then 2, 3, …: its events' ids carry it from 2 on.
    public var number: Int
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
        paymentSeq: String, number: Int = 1, userId: String, store: Store, notificationId: String, reason: String,
        storeReason: String? = nil, quantity: Int? = nil, revokedAt: Date, recordedAt: Date, reversedBy: String? = nil,
        reversedAt: Date? = nil
    ) {
        self.paymentSeq = paymentSeq
        self.number = number
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

    /// The `reason` of a partial revocation.
    public static let partialRefund = "partial_refund"

    /// The `reason` of a refund: Google's quantity-based partial refund takes back part of a purchase; anything else
    /// takes it all.
    public static func reason(of notification: StoreNotification) -> String {
        notification.isPartialRefund ? partialRefund : "refund"
    }

    /// Whether it takes back part of the purchase (the units of a partial refund) rather than the whole.
    public var isPartial: Bool { reason == Self.partialRefund }
}

extension StoreNotification {
    /// A refund that takes back part of a purchase: Google's quantity-based partial refund.
    public var isPartialRefund: Bool {
        kind == .refund && store == .google && reason == RevocationRecord.googlePartialRefund
    }
}

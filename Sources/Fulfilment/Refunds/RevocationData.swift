import Foundation
import Wire

/// `data` of an item-revoked or refund-reversed event (DESIGN §2).
public struct RevocationData: Codable, Sendable, Hashable, EventData {
    public var userId: String
    public var paymentSeq: String
    public var gamebaseProductId: String
    public var paymentId: String?
    public var price: Decimal?
    public var currency: String?
    /// `apple` or `google`.
    public var store: String
    /// `refund` or `partial_refund`.
    public var reason: String
    /// Whether the revocation takes back part of the purchase (the `quantity` units) rather than all the player still
    /// holds of it.
    public var partial: Bool
    /// The store's own reason code, as it gave it.
    public var storeReason: String?
    /// How many units a partial refund takes back.
    public var quantity: Int?
    /// When the store says the refund happened (RFC 3339).
    public var revokedAt: String
    /// refund-reversed only: when the store says the refund was reversed.
    public var reversedAt: String?
    /// The notification this event reports: the refund's, or the reversal's.
    public var notificationId: String
    /// How the notification came: `apple-notification-history`, `apple-notification`, `google-rtdn` or
    /// `google-voided-purchases-api`.
    public var source: String

    func writeMembers(to object: inout JSONObject) {
        object.string("userId", userId)
        object.string("paymentSeq", paymentSeq)
        object.string("gamebaseProductId", gamebaseProductId)
        object.string("paymentId", paymentId)
        object.decimal("price", price)
        object.string("currency", currency)
        object.string("store", store)
        object.string("reason", reason)
        object.bool("partial", partial)
        object.string("storeReason", storeReason)
        object.integer("quantity", quantity)
        object.string("revokedAt", revokedAt)
        object.string("reversedAt", reversedAt)
        object.string("notificationId", notificationId)
        object.string("source", source)
    }
}

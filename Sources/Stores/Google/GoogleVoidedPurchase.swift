import Crypto
import Foundation
import Fulfilment
import Wire

extension GoogleNotification {
    /// The most units a partial refund is believed to take back (a purchase's quantity is far below it).
    static let maxQuantity: Int64 = 1_000_000

    /// Reads one entry of the Voided Purchases API's list (`{"kind": "androidpublisher#voidedPurchase",
    /// "purchaseToken", "purchaseTimeMillis", "voidedTimeMillis", "orderId", "voidedSource", "voidedReason",
    /// "voidedQuantity"}`) as a refund of the order: partial, with its units, when `voidedQuantity` says so.
    ///
    /// Its notification id is the one the same void has when RTDN reports it (``derivedId(_:_:_:_:)`` of the package,
    /// the void's time, `voidedPurchaseNotification`, the order id and the token's hash), so a void read both ways is
    /// recorded once — as long as Google gives the RTDN's `eventTimeMillis` the void's time, as its simulator does.
    /// Whoever reads it, a full refund revokes a grant once (the refund plan's state), so only a partial read both ways
    /// with different times would count twice.
    ///
    /// The API is called with the studio's own credentials over TLS: what it says is believed
    /// (``StoreNotification/Authenticity/signedByStore`` does not apply; ``StoreNotification/Authenticity/trustedChannel``).
    public static func voidedPurchase(
        _ bytes: [UInt8], packageName: String
    ) -> Result<StoreNotification, StoreNotificationError> {
        do throws(StoreNotificationError) {
            guard UTF8Text.isValid(bytes) else { throw refused("the voided purchase is not UTF-8") }
            let fields = try members(of: bytes[...], what: "the voided purchase")
            guard let tokenValue = fields["purchaseToken"] else { throw refused("purchaseToken is missing") }
            let token = try string(tokenValue, "purchaseToken", limit: Limits.purchaseToken)
            guard !token.isEmpty else { throw refused("purchaseToken is empty") }
            guard let orderValue = fields["orderId"] else { throw refused("orderId is missing") }
            let orderId = try identifier(orderValue, "orderId")
            guard let timeValue = fields["voidedTimeMillis"] else { throw refused("voidedTimeMillis is missing") }
            let voidedTime = try millis(timeValue, "voidedTimeMillis")
            let quantity = try fields["voidedQuantity"].map { value throws(StoreNotificationError) in
                try integer(value, "voidedQuantity")
            }
            if let quantity, quantity < 0 || quantity > maxQuantity {
                throw refused("voidedQuantity is not between 0 and \(maxQuantity)")
            }
            let partial = (quantity ?? 0) > 0
            let tokenHash = SHA256.hex(token)
            return .success(
                StoreNotification(
                    store: .google, kind: .refund, storeType: "voidedPurchase",
                    notificationId: derivedId(
                        packageName, voidedTime, "voidedPurchaseNotification", [orderId, tokenHash]),
                    authenticity: .trustedChannel, paymentId: orderId, purchaseTokenHash: tokenHash,
                    application: packageName,
                    reason: partial ? RevocationRecord.googlePartialRefund : refundReason(1),
                    quantity: partial ? quantity.flatMap { Int(exactly: $0) } : nil,
                    occurredAt: Date(timeIntervalSince1970: Double(voidedTime) / 1_000)))
        } catch {
            return .failure(error)
        }
    }
}

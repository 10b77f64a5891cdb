import Foundation

/// What a store said about one payment, read from its notification and believed (an Apple notification only once its
/// signature and certificate chain verify): a refund, its reversal, a declined refund, or Apple's request for
/// consumption information. Carries no purchase token: Google's is kept only as its hash.
public struct StoreNotification: Sendable, Hashable {
    /// How a notification's origin was established.
    public enum Authenticity: String, Sendable, Hashable {
        /// Its JWS and certificate chain verified to a trusted root.
        case signedByStore = "signed_by_store"
        /// Read from a channel the studio controls, with nothing to verify.
        case trustedChannel = "trusted_channel"
    }

    /// What the notification means for a grant.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// The payment's money went back: the grant is revoked.
        case refund
        /// A refund was undone (Apple's `REFUND_REVERSED`).
        case refundReversed = "refund_reversed"
        /// A refund the player asked for was declined (Apple's `REFUND_DECLINED`): recorded, nothing changes.
        case refundDeclined = "refund_declined"
        /// Apple asks for consumption information before deciding a refund (`CONSUMPTION_REQUEST`).
        case consumptionRequest = "consumption_request"
        /// Any other notification (a subscription's, a test notification): counted, nothing else.
        case other

        /// The kinds the console counts as refunds: a refund, its reversal, a declined refund.
        public static let refunds: [Kind] = [.refund, .refundReversed, .refundDeclined]

        public var isRefund: Bool { Self.refunds.contains(self) }
    }

    public var store: Store
    public var kind: Kind
    /// The store's own name for the notification: Apple's `notificationType` (with `/subtype` when there is one),
    /// Google's notification member (`voidedPurchaseNotification`, `testNotification`, …).
    public var storeType: String
    /// Unique per notification, and the same however often and in whatever wrapping it arrives: Apple's
    /// `notificationUUID` (inside the signed payload); for Google a hash of what the notification says (see
    /// ``GoogleNotification``), never the Pub/Sub `messageId`, which a retried publish or a writer to the topic changes.
    public var notificationId: String
    /// How the store's word was checked: Apple's by its signature and certificate chain; Google's notifications carry
    /// no signature, so they are as trustworthy as the topic they came through (its write access is the control).
    public var authenticity: Authenticity
    /// The Pub/Sub `messageId` a Google notification came with, if any: for tracing a delivery, never an identity.
    public var deliveryId: String?
    /// The store payment id the ledger keeps as `paymentId`: Apple's `transactionId`, Google's `orderId`.
    public var paymentId: String?
    /// SHA-256 (lower-case hex) of Google's purchase token; the token itself is a secret and is never kept.
    public var purchaseTokenHash: String?
    /// The app the notification is about: Apple's bundle id, Google's package name.
    public var application: String?
    /// The store's environment when it names one (Apple: `Production` or `Sandbox`).
    public var environment: String?
    /// The store's product id, when the notification names it.
    public var productId: String?
    /// The store's own reason code: Apple's `revocationReason`, Google's `refundType` (1 full, 2 quantity-based
    /// partial).
    public var reason: String?
    /// How many units a partial refund takes back, when the store says.
    public var quantity: Int?
    /// When the store says it happened (Apple's `revocationDate` or `signedDate`, Google's `eventTimeMillis`).
    public var occurredAt: Date

    public init(
        store: Store, kind: Kind, storeType: String, notificationId: String, authenticity: Authenticity,
        deliveryId: String? = nil, paymentId: String? = nil,
        purchaseTokenHash: String? = nil, application: String? = nil, environment: String? = nil,
        productId: String? = nil, reason: String? = nil, quantity: Int? = nil, occurredAt: Date
    ) {
        self.store = store
        self.kind = kind
        self.storeType = storeType
        self.notificationId = notificationId
        self.authenticity = authenticity
        self.deliveryId = deliveryId
        self.paymentId = paymentId
        self.purchaseTokenHash = purchaseTokenHash
        self.application = application
        self.environment = environment
        self.productId = productId
        self.reason = reason
        self.quantity = quantity
        self.occurredAt = occurredAt
    }
}

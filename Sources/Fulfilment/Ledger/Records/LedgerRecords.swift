import Crypto
import Foundation
import Wire

/// Where a message came from.
public struct MessageSource: Sendable, Hashable, Codable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64

    public init(topic: String, partition: Int32, offset: Int64) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
    }
}

public enum GrantState: String, Sendable, Hashable, Codable {
    /// The item is granted; Gamebase Consume has not succeeded yet.
    case granted
    /// Gamebase Consume succeeded (or answered 5018).
    case consumed
}

/// The grant of one payment: at most one per `paymentSeq`, ever.
public struct GrantRecord: Sendable, Hashable {
    /// The fields, in one box its copies share (``CopyOnWrite``): a record crosses many suspension points by value.
    private var fields: CopyOnWrite<Fields>

    struct Fields: Sendable, Hashable {
        var paymentSeq: String
        var userId: String
        var gamebaseProductId: String
        var purchaseToken: String
        var productSeq: Int64?
        var marketId: String?
        var productType: String?
        var price: String?
        var currency: String?
        var paymentId: String?
        var isTestPurchase: Bool
        var purchaseTime: String?
        var payload: String?
        var state: GrantState
        var grantedAt: Date
        var consumedAt: Date?
        var consumeAttempts: Int
        var lastResultCode: Int?
        var eventPublishedAt: Date?
        var source: MessageSource?
        var origin: PurchaseOrigin
        var messageTimestampMilliseconds: Int64?
    }

    public var paymentSeq: String {
        get { fields.value.paymentSeq }
        set { fields.value.paymentSeq = newValue }
    }
    public var userId: String {
        get { fields.value.userId }
        set { fields.value.userId = newValue }
    }
    public var gamebaseProductId: String {
        get { fields.value.gamebaseProductId }
        set { fields.value.gamebaseProductId = newValue }
    }
    /// Needed to call Consume again; never logged.
    public var purchaseToken: String {
        get { fields.value.purchaseToken }
        set { fields.value.purchaseToken = newValue }
    }
    public var productSeq: Int64? {
        get { fields.value.productSeq }
        set { fields.value.productSeq = newValue }
    }
    public var marketId: String? {
        get { fields.value.marketId }
        set { fields.value.marketId = newValue }
    }
    public var productType: String? {
        get { fields.value.productType }
        set { fields.value.productType = newValue }
    }
    /// The price as Gamebase's decimal text (`2.29`).
    public var price: String? {
        get { fields.value.price }
        set { fields.value.price = newValue }
    }
    public var currency: String? {
        get { fields.value.currency }
        set { fields.value.currency = newValue }
    }
    public var paymentId: String? {
        get { fields.value.paymentId }
        set { fields.value.paymentId = newValue }
    }
    public var isTestPurchase: Bool {
        get { fields.value.isTestPurchase }
        set { fields.value.isTestPurchase = newValue }
    }
    public var purchaseTime: String? {
        get { fields.value.purchaseTime }
        set { fields.value.purchaseTime = newValue }
    }
    public var payload: String? {
        get { fields.value.payload }
        set { fields.value.payload = newValue }
    }
    public var state: GrantState {
        get { fields.value.state }
        set { fields.value.state = newValue }
    }
    public var grantedAt: Date {
        get { fields.value.grantedAt }
        set { fields.value.grantedAt = newValue }
    }
    public var consumedAt: Date? {
        get { fields.value.consumedAt }
        set { fields.value.consumedAt = newValue }
    }
    public var consumeAttempts: Int {
        get { fields.value.consumeAttempts }
        set { fields.value.consumeAttempts = newValue }
    }
    public var lastResultCode: Int? {
        get { fields.value.lastResultCode }
        set { fields.value.lastResultCode = newValue }
    }
    public var eventPublishedAt: Date? {
        get { fields.value.eventPublishedAt }
        set { fields.value.eventPublishedAt = newValue }
    }
    /// The message it was granted for; `nil` for a payment found by reconciliation.
    public var source: MessageSource? {
        get { fields.value.source }
        set { fields.value.source = newValue }
    }
    /// How the payment was found (`data.source` of its item-granted event).
    public var origin: PurchaseOrigin {
        get { fields.value.origin }
        set { fields.value.origin = newValue }
    }
    /// The Kafka timestamp of the message it was granted for (milliseconds since the epoch), when it had one.
    public var messageTimestampMilliseconds: Int64? {
        get { fields.value.messageTimestampMilliseconds }
        set { fields.value.messageTimestampMilliseconds = newValue }
    }

    public init(
        paymentSeq: String, userId: String, gamebaseProductId: String, purchaseToken: String, productSeq: Int64? = nil,
        marketId: String? = nil, productType: String? = nil, price: String? = nil, currency: String? = nil,
        paymentId: String? = nil, isTestPurchase: Bool = false, purchaseTime: String? = nil, payload: String? = nil,
        state: GrantState = .granted, grantedAt: Date, consumedAt: Date? = nil, consumeAttempts: Int = 0,
        lastResultCode: Int? = nil, eventPublishedAt: Date? = nil, source: MessageSource? = nil,
        origin: PurchaseOrigin = .message, messageTimestampMilliseconds: Int64? = nil
    ) {
        fields = CopyOnWrite(
            Fields(
                paymentSeq: paymentSeq, userId: userId, gamebaseProductId: gamebaseProductId,
                purchaseToken: purchaseToken, productSeq: productSeq, marketId: marketId, productType: productType,
                price: price, currency: currency, paymentId: paymentId, isTestPurchase: isTestPurchase,
                purchaseTime: purchaseTime, payload: payload, state: state, grantedAt: grantedAt,
                consumedAt: consumedAt, consumeAttempts: consumeAttempts, lastResultCode: lastResultCode,
                eventPublishedAt: eventPublishedAt, source: source, origin: origin,
                messageTimestampMilliseconds: messageTimestampMilliseconds))
    }
}

/// Identifies one judged message: a rejection belongs to the message, never to the paymentSeq alone.
public struct RejectionKey: Sendable, Hashable {
    public var paymentSeq: String
    public var userId: String
    /// SHA-256 (hex) of the purchase token: the ledger needs to recognise the token, not keep it.
    public var tokenHash: String

    public init(paymentSeq: String, userId: String, tokenHash: String) {
        self.paymentSeq = paymentSeq
        self.userId = userId
        self.tokenHash = tokenHash
    }
}

/// A message judged not grantable, with the reason code of its consume-failed event.
public struct RejectionRecord: Sendable, Hashable {
    /// The fields, in one box its copies share (``CopyOnWrite``): a record crosses many suspension points by value.
    private var fields: CopyOnWrite<Fields>

    struct Fields: Sendable, Hashable {
        var key: RejectionKey
        var reason: String
        var resultCode: Int?
        var resultMessage: String?
        var detail: String?
        var eventID: String
        var rejectedAt: Date
        var source: MessageSource?
        var messageTimestampMilliseconds: Int64?
        var verdict: PaymentVerdict?
    }

    public var key: RejectionKey {
        get { fields.value.key }
        set { fields.value.key = newValue }
    }
    public var reason: String {
        get { fields.value.reason }
        set { fields.value.reason = newValue }
    }
    public var resultCode: Int? {
        get { fields.value.resultCode }
        set { fields.value.resultCode = newValue }
    }
    public var resultMessage: String? {
        get { fields.value.resultMessage }
        set { fields.value.resultMessage = newValue }
    }
    public var detail: String? {
        get { fields.value.detail }
        set { fields.value.detail = newValue }
    }
    public var eventID: String {
        get { fields.value.eventID }
        set { fields.value.eventID = newValue }
    }
    public var rejectedAt: Date {
        get { fields.value.rejectedAt }
        set { fields.value.rejectedAt = newValue }
    }
    public var source: MessageSource? {
        get { fields.value.source }
        set { fields.value.source = newValue }
    }
    /// The Kafka timestamp of the judged message (milliseconds since the epoch), when it had one.
    public var messageTimestampMilliseconds: Int64? {
        get { fields.value.messageTimestampMilliseconds }
        set { fields.value.messageTimestampMilliseconds = newValue }
    }
    /// What Gamebase said of the payment when the verdict came from its answer; `nil` when Gamebase refused the token
    /// or was not asked (a claim against an existing grant).
    public var verdict: PaymentVerdict? {
        get { fields.value.verdict }
        set { fields.value.verdict = newValue }
    }

    public init(
        key: RejectionKey, reason: String, resultCode: Int? = nil, resultMessage: String? = nil, detail: String? = nil,
        eventID: String, rejectedAt: Date, source: MessageSource? = nil, messageTimestampMilliseconds: Int64? = nil,
        verdict: PaymentVerdict? = nil
    ) {
        fields = CopyOnWrite(
            Fields(
                key: key, reason: reason, resultCode: resultCode, resultMessage: resultMessage, detail: detail,
                eventID: eventID, rejectedAt: rejectedAt, source: source,
                messageTimestampMilliseconds: messageTimestampMilliseconds, verdict: verdict))
    }
}

/// A header of an outbox event.
public struct EventHeader: Sendable, Hashable, Codable {
    public var name: String
    public var value: String
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// An event written in the same transaction as the state change it announces, published afterwards.
public struct OutboxEvent: Sendable, Hashable {
    public var id: String
    public var paymentSeq: String?
    public var topic: String
    public var key: [UInt8]?
    public var headers: [EventHeader]
    public var payload: [UInt8]
    public var createdAt: Date
    public var publishedAt: Date?

    public init(
        id: String, paymentSeq: String?, topic: String, key: [UInt8]?, headers: [EventHeader], payload: [UInt8],
        createdAt: Date, publishedAt: Date? = nil
    ) {
        self.id = id
        self.paymentSeq = paymentSeq
        self.topic = topic
        self.key = key
        self.headers = headers
        self.payload = payload
        self.createdAt = createdAt
        self.publishedAt = publishedAt
    }
}

/// The answer to ``PurchaseLedger/insertGrants(_:)`` for one grant.
public enum GrantInsertResult: Sendable, Hashable {
    case inserted
    /// The paymentSeq was granted already (another worker won the race, or a redelivery).
    case alreadyGranted(GrantRecord)
    /// Not granted: the store refunded the payment before (the notification id of the refund kept `pending`).
    case refunded(notificationId: String)
}

/// Counts for `iap-worker ledger stats`.
public struct LedgerStats: Sendable, Hashable, Codable {
    public var granted: Int
    public var consumed: Int
    public var rejections: [String: Int]
    public var unpublishedEvents: Int

    public init(granted: Int, consumed: Int, rejections: [String: Int], unpublishedEvents: Int) {
        self.granted = granted
        self.consumed = consumed
        self.rejections = rejections
        self.unpublishedEvents = unpublishedEvents
    }
}

extension Date {
    /// Rounded, clamped to `Int64`.
    package var epochMilliseconds: Int64 {
        let milliseconds = (timeIntervalSince1970 * 1000).rounded()
        return Int64(exactly: milliseconds) ?? (milliseconds > 0 ? .max : .min)
    }
    package init(epochMilliseconds: Int64) { self.init(timeIntervalSince1970: Double(epochMilliseconds) / 1000) }
}

extension GrantRecord {
    /// The SHA-256 (hex) of the purchase token, as rejections keep it: what people may see of the token.
    public var tokenHash: String { SHA256.hex(purchaseToken) }
}

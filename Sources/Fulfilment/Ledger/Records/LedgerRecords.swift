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
    public var paymentSeq: String
    public var userId: String
    public var gamebaseProductId: String
    /// Needed to call Consume again; never logged.
    public var purchaseToken: String
    public var productSeq: Int64?
    public var marketId: String?
    public var productType: String?
    /// The price as Gamebase's decimal text (`2.29`).
    public var price: String?
    public var currency: String?
    public var paymentId: String?
    public var isTestPurchase: Bool
    public var purchaseTime: String?
    public var payload: String?
    public var state: GrantState
    public var grantedAt: Date
    public var consumedAt: Date?
    public var consumeAttempts: Int
    public var lastResultCode: Int?
    public var eventPublishedAt: Date?
    /// The message it was granted for; `nil` for a payment found by reconciliation.
    public var source: MessageSource?
    /// How the payment was found (`data.source` of its item-granted event).
    public var origin: PurchaseOrigin
    /// The Kafka timestamp of the message it was granted for (milliseconds since the epoch), when it had one.
    public var messageTimestampMilliseconds: Int64?

    public init(
        paymentSeq: String, userId: String, gamebaseProductId: String, purchaseToken: String, productSeq: Int64? = nil,
        marketId: String? = nil, productType: String? = nil, price: String? = nil, currency: String? = nil,
        paymentId: String? = nil, isTestPurchase: Bool = false, purchaseTime: String? = nil, payload: String? = nil,
        state: GrantState = .granted, grantedAt: Date, consumedAt: Date? = nil, consumeAttempts: Int = 0,
        lastResultCode: Int? = nil, eventPublishedAt: Date? = nil, source: MessageSource? = nil,
        origin: PurchaseOrigin = .message, messageTimestampMilliseconds: Int64? = nil
    ) {
        self.paymentSeq = paymentSeq
        self.userId = userId
        self.gamebaseProductId = gamebaseProductId
        self.purchaseToken = purchaseToken
        self.productSeq = productSeq
        self.marketId = marketId
        self.productType = productType
        self.price = price
        self.currency = currency
        self.paymentId = paymentId
        self.isTestPurchase = isTestPurchase
        self.purchaseTime = purchaseTime
        self.payload = payload
        self.state = state
        self.grantedAt = grantedAt
        self.consumedAt = consumedAt
        self.consumeAttempts = consumeAttempts
        self.lastResultCode = lastResultCode
        self.eventPublishedAt = eventPublishedAt
        self.source = source
        self.origin = origin
        self.messageTimestampMilliseconds = messageTimestampMilliseconds
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
    public var key: RejectionKey
    public var reason: String
    public var resultCode: Int?
    public var resultMessage: String?
    public var detail: String?
    public var eventID: String
    public var rejectedAt: Date
    public var source: MessageSource?
    /// The Kafka timestamp of the judged message (milliseconds since the epoch), when it had one.
    public var messageTimestampMilliseconds: Int64?
    /// What Gamebase said of the payment when the verdict came from its answer; `nil` when Gamebase refused the token
    /// or was not asked (a claim against an existing grant).
    public var verdict: PaymentVerdict?

    public init(
        key: RejectionKey, reason: String, resultCode: Int? = nil, resultMessage: String? = nil, detail: String? = nil,
        eventID: String, rejectedAt: Date, source: MessageSource? = nil, messageTimestampMilliseconds: Int64? = nil,
        verdict: PaymentVerdict? = nil
    ) {
        self.key = key
        self.reason = reason
        self.resultCode = resultCode
        self.resultMessage = resultMessage
        self.detail = detail
        self.eventID = eventID
        self.rejectedAt = rejectedAt
        self.source = source
        self.messageTimestampMilliseconds = messageTimestampMilliseconds
        self.verdict = verdict
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

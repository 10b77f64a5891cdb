import Foundation
import Wire

/// The result of Get Payment Transaction (contract §4): one payment as Gamebase knows it.
///
/// Only `paymentSeq` and `userId` are required; every other field may be missing in an answer and is optional
/// here. Unknown fields are ignored (contract §3.4).
public struct PaymentTransaction: Codable, Sendable, Hashable {
    /// The fields, in one box its copies share (``CopyOnWrite``): a record crosses many suspension points by value.
    private var fields: CopyOnWrite<Fields>

    struct Fields: Sendable, Hashable, Codable {
        var paymentSeq: String
        var userId: String
        var productSeq: Int64?
        var currency: String?
        var price: Decimal?
        var marketId: String?
        var accessToken: String?
        var paymentId: String?
        var paymentToken: String?
        var productType: String?
        var gamebaseProductId: String?
        var purchaseTime: String?
        var payload: String?
        var isTestPurchase: Bool?
        var isConsumable: Bool?
    }

    public var paymentSeq: String {
        get { fields.value.paymentSeq }
        set { fields.value.paymentSeq = newValue }
    }
    public var userId: String {
        get { fields.value.userId }
        set { fields.value.userId = newValue }
    }
    public var productSeq: Int64? {
        get { fields.value.productSeq }
        set { fields.value.productSeq = newValue }
    }
    public var currency: String? {
        get { fields.value.currency }
        set { fields.value.currency = newValue }
    }
    /// A decimal price (`2.29`), parsed without going through binary floating point.
    public var price: Decimal? {
        get { fields.value.price }
        set { fields.value.price = newValue }
    }
    public var marketId: String? {
        get { fields.value.marketId }
        set { fields.value.marketId = newValue }
    }
    public var accessToken: String? {
        get { fields.value.accessToken }
        set { fields.value.accessToken = newValue }
    }
    public var paymentId: String? {
        get { fields.value.paymentId }
        set { fields.value.paymentId = newValue }
    }
    public var paymentToken: String? {
        get { fields.value.paymentToken }
        set { fields.value.paymentToken = newValue }
    }
    /// `CONSUMABLE`, `CONSUMABLE_AUTO_RENEWABLE` or `AUTO_RENEWABLE`.
    public var productType: String? {
        get { fields.value.productType }
        set { fields.value.productType = newValue }
    }
    public var gamebaseProductId: String? {
        get { fields.value.gamebaseProductId }
        set { fields.value.gamebaseProductId = newValue }
    }
    /// ISO 8601 with offset, as Gamebase sent it.
    public var purchaseTime: String? {
        get { fields.value.purchaseTime }
        set { fields.value.purchaseTime = newValue }
    }
    public var payload: String? {
        get { fields.value.payload }
        set { fields.value.payload = newValue }
    }
    public var isTestPurchase: Bool? {
        get { fields.value.isTestPurchase }
        set { fields.value.isTestPurchase = newValue }
    }
    /// `true` while the payment is not yet consumed.
    public var isConsumable: Bool? {
        get { fields.value.isConsumable }
        set { fields.value.isConsumable = newValue }
    }

    public init(
        paymentSeq: String, userId: String, productSeq: Int64? = nil, currency: String? = nil, price: Decimal? = nil,
        marketId: String? = nil, accessToken: String? = nil, paymentId: String? = nil, paymentToken: String? = nil,
        productType: String? = nil, gamebaseProductId: String? = nil, purchaseTime: String? = nil,
        payload: String? = nil, isTestPurchase: Bool? = nil, isConsumable: Bool? = nil
    ) {
        fields = CopyOnWrite(
            Fields(
                paymentSeq: paymentSeq, userId: userId, productSeq: productSeq, currency: currency, price: price,
                marketId: marketId, accessToken: accessToken, paymentId: paymentId, paymentToken: paymentToken,
                productType: productType, gamebaseProductId: gamebaseProductId, purchaseTime: purchaseTime,
                payload: payload, isTestPurchase: isTestPurchase, isConsumable: isConsumable))
    }

    public init(from decoder: any Decoder) throws {
        fields = CopyOnWrite(try Fields(from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        try fields.value.encode(to: encoder)
    }
}

/// Product types (contract §9.2).
public enum GamebaseProductType {
    public static let consumable = "CONSUMABLE"
    public static let consumableAutoRenewable = "CONSUMABLE_AUTO_RENEWABLE"
    public static let autoRenewable = "AUTO_RENEWABLE"

    /// Types that Consume accepts.
    public static func isConsumable(_ type: String?) -> Bool {
        type == consumable || type == consumableAutoRenewable
    }
}

/// The result of Consume (contract §5).
public struct ConsumeResult: Codable, Sendable, Hashable {
    /// The fields, in one box its copies share (``CopyOnWrite``): the answer crosses the client's and the flow's
    /// suspension points by value, in its envelope and in ``ConsumeOutcome``; inline it was 104 bytes of each such
    /// slot in the frames of every purchase in flight (issue #39).
    private var fields: CopyOnWrite<Fields>

    struct Fields: Sendable, Hashable, Codable {
        var price: Decimal?
        var currency: String?
        var productSeq: Int64?
        var marketId: String?
        var gamebaseProductId: String?
        var payload: String?
    }

    public var price: Decimal? {
        get { fields.value.price }
        set { fields.value.price = newValue }
    }
    public var currency: String? {
        get { fields.value.currency }
        set { fields.value.currency = newValue }
    }
    public var productSeq: Int64? {
        get { fields.value.productSeq }
        set { fields.value.productSeq = newValue }
    }
    public var marketId: String? {
        get { fields.value.marketId }
        set { fields.value.marketId = newValue }
    }
    public var gamebaseProductId: String? {
        get { fields.value.gamebaseProductId }
        set { fields.value.gamebaseProductId = newValue }
    }
    public var payload: String? {
        get { fields.value.payload }
        set { fields.value.payload = newValue }
    }

    public init(
        price: Decimal? = nil, currency: String? = nil, productSeq: Int64? = nil, marketId: String? = nil,
        gamebaseProductId: String? = nil, payload: String? = nil
    ) {
        fields = CopyOnWrite(
            Fields(
                price: price, currency: currency, productSeq: productSeq, marketId: marketId,
                gamebaseProductId: gamebaseProductId, payload: payload))
    }

    public init(from decoder: any Decoder) throws {
        fields = CopyOnWrite(try Fields(from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        try fields.value.encode(to: encoder)
    }
}

/// One entry of List Consumables (contract §6). It has no `userId` and no `productType`.
public struct ConsumableItem: Codable, Sendable, Hashable {
    public var paymentSeq: String
    public var productSeq: Int64?
    public var currency: String?
    public var price: Decimal?
    public var marketId: String?
    public var accessToken: String?
    public var paymentId: String?
    public var gamebaseProductId: String?
    public var purchaseTime: String?
    public var payload: String?
    public var isTestPurchase: Bool?

    public init(
        paymentSeq: String, productSeq: Int64? = nil, currency: String? = nil, price: Decimal? = nil,
        marketId: String? = nil, accessToken: String? = nil, paymentId: String? = nil, gamebaseProductId: String? = nil,
        purchaseTime: String? = nil, payload: String? = nil, isTestPurchase: Bool? = nil
    ) {
        self.paymentSeq = paymentSeq
        self.productSeq = productSeq
        self.currency = currency
        self.price = price
        self.marketId = marketId
        self.accessToken = accessToken
        self.paymentId = paymentId
        self.gamebaseProductId = gamebaseProductId
        self.purchaseTime = purchaseTime
        self.payload = payload
        self.isTestPurchase = isTestPurchase
    }
}

/// The answer to Consume: applied now, or applied before (`5018`).
public enum ConsumeOutcome: Sendable, Hashable {
    case consumed(ConsumeResult)
    case alreadyConsumed
}

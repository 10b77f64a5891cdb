import Foundation

/// The result of Get Payment Transaction (contract §4): one payment as Gamebase knows it.
///
/// Only `paymentSeq` and `userId` are required; every other field may be missing in an answer and is optional
/// here. Unknown fields are ignored (contract §3.4).
public struct PaymentTransaction: Codable, Sendable, Hashable {
    public var paymentSeq: String
    public var userId: String
    public var productSeq: Int64?
    public var currency: String?
    /// A decimal price (`2.29`), parsed without going through binary floating point.
    public var price: Decimal?
    public var marketId: String?
    public var accessToken: String?
    public var paymentId: String?
    public var paymentToken: String?
    /// `CONSUMABLE`, `CONSUMABLE_AUTO_RENEWABLE` or `AUTO_RENEWABLE`.
    public var productType: String?
    public var gamebaseProductId: String?
    /// ISO 8601 with offset, as Gamebase sent it.
    public var purchaseTime: String?
    public var payload: String?
    public var isTestPurchase: Bool?
    /// `true` while the payment is not yet consumed.
    public var isConsumable: Bool?

    public init(
        paymentSeq: String, userId: String, productSeq: Int64? = nil, currency: String? = nil, price: Decimal? = nil,
        marketId: String? = nil, accessToken: String? = nil, paymentId: String? = nil, paymentToken: String? = nil,
        productType: String? = nil, gamebaseProductId: String? = nil, purchaseTime: String? = nil,
        payload: String? = nil, isTestPurchase: Bool? = nil, isConsumable: Bool? = nil
    ) {
        self.paymentSeq = paymentSeq
        self.userId = userId
        self.productSeq = productSeq
        self.currency = currency
        self.price = price
        self.marketId = marketId
        self.accessToken = accessToken
        self.paymentId = paymentId
        self.paymentToken = paymentToken
        self.productType = productType
        self.gamebaseProductId = gamebaseProductId
        self.purchaseTime = purchaseTime
        self.payload = payload
        self.isTestPurchase = isTestPurchase
        self.isConsumable = isConsumable
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
    public var price: Decimal?
    public var currency: String?
    public var productSeq: Int64?
    public var marketId: String?
    public var gamebaseProductId: String?
    public var payload: String?

    public init(
        price: Decimal? = nil, currency: String? = nil, productSeq: Int64? = nil, marketId: String? = nil,
        gamebaseProductId: String? = nil, payload: String? = nil
    ) {
        self.price = price
        self.currency = currency
        self.productSeq = productSeq
        self.marketId = marketId
        self.gamebaseProductId = gamebaseProductId
        self.payload = payload
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

import Foundation
import Gamebase
import Wire

/// A CloudEvents 1.0 event in structured mode (`content-type: application/cloudevents+json`).
struct CloudEvent<Payload: EventData> {
    var specversion = "1.0"
    var id: String
    var source: String
    var type: String
    var subject: String?
    var time: String
    var datacontenttype = "application/json"
    var data: Payload

    static var contentType: String { "application/cloudevents+json" }

    /// The event's JSON, members in declaration order, written by hand because it runs for every purchase.
    func encoded() -> [UInt8] {
        var text = ""
        text.reserveCapacity(640)
        JSONText.appendObject(to: &text) { object in
            object.string("specversion", specversion)
            object.string("id", id)
            object.string("source", source)
            object.string("type", type)
            object.string("subject", subject)
            object.string("time", time)
            object.string("datacontenttype", datacontenttype)
            object.object("data", data.writeMembers)
        }
        return Array(text.utf8)
    }
}

/// An event's `data`: writes its members as its `Codable` form would, in declaration order.
protocol EventData {
    func writeMembers(to object: inout JSONObject)
}

/// `data` of an item-granted event.
public struct ItemGrantedData: Codable, Sendable, Hashable, EventData {
    public var userId: String
    public var paymentSeq: String
    public var gamebaseProductId: String
    public var productSeq: Int64?
    public var marketId: String?
    public var productType: String?
    public var price: Decimal?
    public var currency: String?
    public var paymentId: String?
    public var purchaseTime: String?
    public var payload: String?
    public var isTestPurchase: Bool
    public var grantedAt: String
    /// `message`, or `reconciliation` when the reconciler found the payment through List Consumables. Optional in
    /// the schema: an event written before the field existed decodes as `message`.
    public var source: String
}

/// `data` of a consume-failed event.
public struct ConsumeFailedData: Codable, Sendable, Hashable, EventData {
    public var userId: String?
    public var paymentSeq: String?
    public var reason: String
    public var retryable: Bool
    public var resultCode: Int?
    public var resultMessage: String?
    public var attempts: Int
    public var detail: String
}

extension ItemGrantedData {
    /// Decodes `data` as written; a `source` absent (an event from before reconciliation) is `message`, as the schema
    /// says, so a consumer reading its topic from the beginning does not fail on older events.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        userId = try container.decode(String.self, forKey: .userId)
        paymentSeq = try container.decode(String.self, forKey: .paymentSeq)
        gamebaseProductId = try container.decode(String.self, forKey: .gamebaseProductId)
        productSeq = try container.decodeIfPresent(Int64.self, forKey: .productSeq)
        marketId = try container.decodeIfPresent(String.self, forKey: .marketId)
        productType = try container.decodeIfPresent(String.self, forKey: .productType)
        price = try container.decodeIfPresent(Decimal.self, forKey: .price)
        currency = try container.decodeIfPresent(String.self, forKey: .currency)
        paymentId = try container.decodeIfPresent(String.self, forKey: .paymentId)
        purchaseTime = try container.decodeIfPresent(String.self, forKey: .purchaseTime)
        payload = try container.decodeIfPresent(String.self, forKey: .payload)
        isTestPurchase = try container.decode(Bool.self, forKey: .isTestPurchase)
        grantedAt = try container.decode(String.self, forKey: .grantedAt)
        source = try container.decodeIfPresent(String.self, forKey: .source) ?? PurchaseOrigin.message.rawValue
    }

    func writeMembers(to object: inout JSONObject) {
        object.string("userId", userId)
        object.string("paymentSeq", paymentSeq)
        object.string("gamebaseProductId", gamebaseProductId)
        object.integer("productSeq", productSeq)
        object.string("marketId", marketId)
        object.string("productType", productType)
        object.decimal("price", price)
        object.string("currency", currency)
        object.string("paymentId", paymentId)
        object.string("purchaseTime", purchaseTime)
        object.string("payload", payload)
        object.bool("isTestPurchase", isTestPurchase)
        object.string("grantedAt", grantedAt)
        object.string("source", source)
    }
}

extension ConsumeFailedData {
    func writeMembers(to object: inout JSONObject) {
        object.string("userId", userId)
        object.string("paymentSeq", paymentSeq)
        object.string("reason", reason)
        object.bool("retryable", retryable)
        object.integer("resultCode", resultCode)
        object.string("resultMessage", resultMessage)
        object.integer("attempts", attempts)
        object.string("detail", detail)
    }
}

import Foundation

/// A CloudEvents 1.0 event in structured mode (`content-type: application/cloudevents+json`).
struct CloudEvent<Payload: Encodable>: Encodable {
    var specversion = "1.0"
    var id: String
    var source: String
    var type: String
    var subject: String?
    var time: String
    var datacontenttype = "application/json"
    var data: Payload

    static var contentType: String { "application/cloudevents+json" }

    func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        // Keys in declaration order (deterministic; sorting them costs a collation per key).
        encoder.outputFormatting = [.withoutEscapingSlashes]
        // Encoding plain structs of strings, numbers and booleans cannot fail.
        return Array((try? encoder.encode(self)) ?? Data())
    }
}

/// `data` of an item-granted event.
public struct ItemGrantedData: Codable, Sendable, Hashable {
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
}

/// `data` of a consume-failed event.
public struct ConsumeFailedData: Codable, Sendable, Hashable {
    public var userId: String?
    public var paymentSeq: String?
    public var reason: String
    public var retryable: Bool
    public var resultCode: Int?
    public var resultMessage: String?
    public var attempts: Int
    public var detail: String
}

import Foundation
import Ledger

/// A CloudEvents 1.0 event in structured mode (`content-type: application/cloudevents+json`).
struct CloudEvent<Payload: EventData>: Encodable {
    var specversion = "1.0"
    var id: String
    var source: String
    var type: String
    var subject: String?
    var time: String
    var datacontenttype = "application/json"
    var data: Payload

    static var contentType: String { "application/cloudevents+json" }

    /// The event's JSON, keys in declaration order: what `JSONEncoder` would write (without escaped slashes),
    /// written by hand because it runs for every purchase.
    func encoded() -> [UInt8] {
        var text = ""
        text.reserveCapacity(640)
        text += "{"
        JSONText.appendKey("specversion", to: &text, first: true)
        JSONText.appendString(specversion, to: &text)
        JSONText.appendKey("id", to: &text)
        JSONText.appendString(id, to: &text)
        JSONText.appendKey("source", to: &text)
        JSONText.appendString(source, to: &text)
        JSONText.appendKey("type", to: &text)
        JSONText.appendString(type, to: &text)
        if let subject {
            JSONText.appendKey("subject", to: &text)
            JSONText.appendString(subject, to: &text)
        }
        JSONText.appendKey("time", to: &text)
        JSONText.appendString(time, to: &text)
        JSONText.appendKey("datacontenttype", to: &text)
        JSONText.appendString(datacontenttype, to: &text)
        JSONText.appendKey("data", to: &text)
        data.appendJSON(to: &text)
        text += "}"
        return Array(text.utf8)
    }
}

/// An event's `data`, which writes itself as a JSON object (its `Codable` form, absent optionals omitted).
protocol EventData: Encodable {
    func appendJSON(to text: inout String)
}

/// Appends `"key":value` for the optional fields of event data.
private struct JSONObjectWriter {
    var text: String
    var first = true

    mutating func key(_ key: StaticString) {
        JSONText.appendKey(key, to: &text, first: first)
        first = false
    }

    mutating func string(_ key: StaticString, _ value: String?) {
        guard let value else { return }
        self.key(key)
        JSONText.appendString(value, to: &text)
    }

    mutating func number(_ key: StaticString, _ value: (some BinaryInteger)?) {
        guard let value else { return }
        self.key(key)
        text += String(value)
    }

    mutating func decimal(_ key: StaticString, _ value: Decimal?) {
        guard let value, value.isFinite else { return }
        self.key(key)
        text += value.description
    }

    mutating func bool(_ key: StaticString, _ value: Bool) {
        self.key(key)
        text += value ? "true" : "false"
    }
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
    func appendJSON(to text: inout String) {
        var object = JSONObjectWriter(text: "{")
        object.string("userId", userId)
        object.string("paymentSeq", paymentSeq)
        object.string("gamebaseProductId", gamebaseProductId)
        object.number("productSeq", productSeq)
        object.string("marketId", marketId)
        object.string("productType", productType)
        object.decimal("price", price)
        object.string("currency", currency)
        object.string("paymentId", paymentId)
        object.string("purchaseTime", purchaseTime)
        object.string("payload", payload)
        object.bool("isTestPurchase", isTestPurchase)
        object.string("grantedAt", grantedAt)
        text += object.text
        text += "}"
    }
}

extension ConsumeFailedData {
    func appendJSON(to text: inout String) {
        var object = JSONObjectWriter(text: "{")
        object.string("userId", userId)
        object.string("paymentSeq", paymentSeq)
        object.string("reason", reason)
        object.bool("retryable", retryable)
        object.number("resultCode", resultCode)
        object.string("resultMessage", resultMessage)
        object.number("attempts", attempts)
        object.string("detail", detail)
        text += object.text
        text += "}"
    }
}

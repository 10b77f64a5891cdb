import Foundation

@testable import Wire

/// A published CloudEvent read back strictly (RFC 8259, the project's reader) and by Foundation's parser: what a
/// downstream consumer sees.
public struct PublishedCloudEvent {
    public var specversion: String?
    public var id: String?
    public var type: String?
    public var subject: String?
    public var time: String?
    public var userId: String?
    public var paymentSeq: String?
    public var gamebaseProductId: String?
    public var reason: String?
    public var attempts: Int64?
    public var price: Decimal?
    public var hasPrice = false

    /// Reads an event; traps with `what` when it is not a JSON object of the expected shape.
    public static func read(_ value: [UInt8], _ what: String) -> PublishedCloudEvent {
        var event = PublishedCloudEvent()
        var reader = JSONReader(value)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                switch key {
                case "specversion": event.specversion = try reader.readString()
                case "id": event.id = try reader.readString()
                case "type": event.type = try reader.readString()
                case "subject": event.subject = try reader.readString()
                case "time": event.time = try reader.readString()
                case "data":
                    try reader.readObject { reader, key throws(JSONReader.Failure) in
                        switch key {
                        case "userId": event.userId = try reader.readString()
                        case "paymentSeq": event.paymentSeq = try reader.readString()
                        case "gamebaseProductId": event.gamebaseProductId = try reader.readString()
                        case "reason": event.reason = try reader.readString()
                        case "attempts": event.attempts = try reader.readInt64()
                        case "price":
                            // Any JSON number (the reader's readDecimal stops at 64 characters: it reads Gamebase).
                            event.hasPrice = true
                            let text = String(decoding: try reader.captureValue(), as: UTF8.self)
                            event.price =
                                text.first.map { $0 == "-" || $0.isNumber } == true ? Decimal(string: text) : nil
                        default: try reader.skipValue()
                        }
                    }
                default: try reader.skipValue()
                }
            }
            try reader.finish()
        } catch {
            fuzzFailure("\(what) is not valid JSON of the event's shape: \(error)")
        }
        fuzzCheck(
            (try? JSONSerialization.jsonObject(with: Data(value))) is [String: Any],
            "\(what): Foundation cannot read the event")
        fuzzCheck(event.specversion == "1.0", "\(what) has no specversion 1.0")
        fuzzCheck(event.id != nil && event.type != nil && event.time != nil, "\(what) lacks id, type or time")
        fuzzCheck(!event.hasPrice || event.price.map { !$0.isNaN } == true, "\(what) has a price that is not a number")
        return event
    }
}

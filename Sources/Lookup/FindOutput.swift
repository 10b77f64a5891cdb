import Foundation
import Fulfilment

/// `iap-worker find --json`: the documented shape (docs/schemas/find-output.schema.json). Times are RFC 3339 in UTC
/// with milliseconds; no token, key or payload ever appears.
public struct FindOutput: Sendable, Hashable, Codable {
    public struct Purchase: Sendable, Hashable, Codable {
        public var paymentSeq: String?
        public var userId: String?
        public var paymentId: String?
        public var status: String
        public var timeline: [Entry]
        public var gamebase: Gamebase?
    }

    public struct Entry: Sendable, Hashable, Codable {
        public var time: String
        public var origin: String
        public var kind: String
        public var summary: String
        public var fields: [String: String]
    }

    public struct Gamebase: Sendable, Hashable, Codable {
        public var checkedAt: String
        public var difference: String
        public var listedUnconsumed: Bool?
        public var error: String?
        public var payment: GamebaseView.Payment?
    }

    public var id: String
    /// `payment_seq`, `payment_id`, `user_id`, `event_id`; `null` when nothing was found.
    public var kind: String?
    public var found: Bool
    public var purchases: [Purchase]
    public var nextBefore: String?

    public init(_ result: FindResult) {
        id = result.id
        kind = result.kind?.rawValue
        found = !result.purchases.isEmpty
        nextBefore = result.nextBefore.map(RFC3339.string)
        purchases = result.purchases.map { purchase in
            Purchase(
                paymentSeq: purchase.paymentSeq, userId: purchase.userId, paymentId: purchase.paymentId,
                status: purchase.status,
                timeline: purchase.entries.map {
                    Entry(time: RFC3339.string($0.time), origin: $0.origin.rawValue, kind: $0.kind.rawValue, summary: $0.summary, fields: $0.fields)
                },
                gamebase: purchase.gamebase.map { view in
                    Gamebase(
                        checkedAt: RFC3339.string(view.checkedAt), difference: view.difference,
                        listedUnconsumed: view.listedUnconsumed, error: view.error,
                        payment: view.payment)
                })
        }
    }

    enum CodingKeys: String, CodingKey { case id, kind, found, purchases, nextBefore }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        // `null` rather than absent: the schema requires it.
        if let kind { try container.encode(kind, forKey: .kind) } else { try container.encodeNil(forKey: .kind) }
        try container.encode(found, forKey: .found)
        try container.encode(purchases, forKey: .purchases)
        try container.encodeIfPresent(nextBefore, forKey: .nextBefore)
    }

    /// One line of JSON.
    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(self) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}

/// `iap-worker find`'s text: a heading per purchase, then its timeline, one line per fact.
public enum FindTextRenderer {
    public static func render(_ result: FindResult) -> String {
        guard let kind = result.kind, !result.purchases.isEmpty else {
            return "nothing found for \(printable(result.id)) (tried it as paymentSeq, store payment id and userId)\n"
        }
        var out = "\(printable(result.id)): \(kind.rawValue.replacingOccurrences(of: "_", with: " ")), "
            + "\(result.purchases.count) purchase\(result.purchases.count == 1 ? "" : "s")\n"
        for purchase in result.purchases {
            out += "\npurchase \(printable(purchase.paymentSeq ?? "(no paymentSeq: malformed message)"))"
            if let userId = purchase.userId { out += "  userId \(printable(userId))" }
            if let paymentId = purchase.paymentId { out += "  paymentId \(printable(paymentId))" }
            out += "\n  status: \(printable(purchase.status))\n"
            for entry in purchase.entries {
                let origin = entry.origin.rawValue.padding(toLength: 14, withPad: " ", startingAt: 0)
                out += "  \(RFC3339.string(entry.time))  \(origin) \(printable(entry.summary))\n"
            }
            if let view = purchase.gamebase {
                out += "  gamebase now (\(RFC3339.string(view.checkedAt))): \(printable(view.difference))\n"
                if let payment = view.payment {
                    out += "    Get Payment Transaction: userId \(printable(payment.userId)), product \(printable(payment.gamebaseProductId ?? "-")), "
                        + "store \(printable(payment.marketId ?? "-")), price \(printable(payment.price ?? "-")) \(printable(payment.currency ?? "")), "
                        + "paymentId \(printable(payment.paymentId ?? "-")), isConsumable \(payment.isConsumable.map { "\($0)" } ?? "-")\n"
                }
                if let listed = view.listedUnconsumed {
                    out += "    List Consumables: \(listed ? "listed unconsumed" : "not listed unconsumed")\n"
                }
                if let error = view.error { out += "    error: \(printable(error))\n" }
            }
        }
        if let next = result.nextBefore {
            out += "\nmore: iap-worker find --user \(printable(result.id)) --before \(RFC3339.string(next))\n"
        }
        return out
    }

    /// A value as it may be shown on a terminal: control characters (a hostile userId's newline or escape) escaped.
    public static func printable(_ text: String) -> String {
        // Control characters, and format characters (a bidi override, a zero-width space) that make a line read
        // other than it is.
        func hidden(_ scalar: Unicode.Scalar) -> Bool {
            scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value)
                || scalar.properties.generalCategory == .format || scalar.value == 0x2028 || scalar.value == 0x2029
        }
        guard text.unicodeScalars.contains(where: hidden) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if hidden(scalar) {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

import Foundation
import Fulfilment
import Wire

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
        nextBefore = result.nextBefore.map(CursorText.string)
        purchases = result.purchases.map { purchase in
            Purchase(
                paymentSeq: purchase.paymentSeq, userId: purchase.userId, paymentId: purchase.paymentId,
                status: purchase.status,
                timeline: purchase.entries.map {
                    Entry(
                        time: RFC3339.string($0.time), origin: $0.origin.rawValue, kind: $0.kind.rawValue,
                        summary: $0.summary, fields: $0.fields)
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

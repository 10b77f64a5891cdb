import Crypto
import Foundation
import Wire

/// A refused record as the ledger keeps it: one row per distinct body (its SHA-256), counted each time it comes.
public struct RefusedNotification: Sendable, Hashable {
    /// SHA-256 (hex) of the record's value: the same body refused again is the same row.
    public var bodyHash: String
    public var store: Store?
    public var code: String
    public var detail: String
    public var bodyBytes: Int
    public var firstReceivedAt: Date
    public var lastReceivedAt: Date
    public var count: Int
    /// Where it last came from, to read it again once the cause is fixed: `topic[partition]@offset` for a record of
    /// the store-notifications topic, the history window and type for one of a store's history (``Source``).
    public var source: String?
    /// The notification id the record claims, not believed (``NotificationRefusal/claimedId``): `find
    /// --notification-id` finds the refusal by it.
    public var claimedId: String?

    public init(
        bodyHash: String, store: Store?, code: String, detail: String, bodyBytes: Int, firstReceivedAt: Date,
        lastReceivedAt: Date, count: Int = 1, source: String? = nil, claimedId: String? = nil
    ) {
        self.claimedId = claimedId
        self.bodyHash = bodyHash
        self.store = store
        self.code = code
        self.detail = detail
        self.bodyBytes = bodyBytes
        self.firstReceivedAt = firstReceivedAt
        self.lastReceivedAt = lastReceivedAt
        self.count = count
        self.source = source
    }

    /// The first refusal of a record's value, from `source`.
    public init(body: [UInt8], refusal: NotificationRefusal, receivedAt: Date, source: String?) {
        self.init(
            bodyHash: SHA256.hex(bytes: body), store: refusal.store, code: refusal.code, detail: refusal.detail,
            bodyBytes: body.count, firstReceivedAt: receivedAt, lastReceivedAt: receivedAt, source: source,
            claimedId: refusal.claimedId)
    }

    /// How a refused record's origin is written, so the runbook can say how to read each kind again.
    public enum Source {
        /// A record of a Kafka topic: `topic[partition]@offset`.
        public static func record(topic: String, partition: Int32, offset: Int64) -> String {
            "\(topic)[\(partition)]@\(offset)"
        }

        /// A page of a store's history: `<store> history <type> <start>..<end>` (RFC 3339, UTC).
        public static func history(store: Store, type: String, from start: Date, to end: Date) -> String {
            "\(store.rawValue) history \(type) \(RFC3339.string(start))..\(RFC3339.string(end))"
        }
    }
}

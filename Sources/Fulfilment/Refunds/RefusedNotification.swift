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

    public init(
        bodyHash: String, store: Store?, code: String, detail: String, bodyBytes: Int, firstReceivedAt: Date,
        lastReceivedAt: Date, count: Int = 1
    ) {
        self.bodyHash = bodyHash
        self.store = store
        self.code = code
        self.detail = detail
        self.bodyBytes = bodyBytes
        self.firstReceivedAt = firstReceivedAt
        self.lastReceivedAt = lastReceivedAt
        self.count = count
    }

    /// The first refusal of a record's value.
    public init(body: [UInt8], refusal: NotificationRefusal, receivedAt: Date) {
        self.init(
            bodyHash: SHA256.hex(bytes: body), store: refusal.store, code: refusal.code, detail: refusal.detail,
            bodyBytes: body.count, firstReceivedAt: receivedAt, lastReceivedAt: receivedAt)
    }
}

import Crypto
import Foundation
import Wire

/// Reads a store-notifications record (a Google RTDN message, or an Apple V2 body `{"signedPayload": …}`) into a
/// believed notification, or says why it is refused. Implemented by the Stores module (Apple's JWS verified before
/// anything in it is believed); the intake and its tests see only this.
public protocol StoreNotificationReading: Sendable {
    func read(_ bytes: [UInt8], receivedAt: Date) async -> Result<ReadNotification, NotificationRefusal>
}

/// A notification read and believed, and how it came.
public struct ReadNotification: Sendable, Hashable {
    public var notification: StoreNotification
    public var channel: NotificationChannel

    public init(notification: StoreNotification, channel: NotificationChannel) {
        self.notification = notification
        self.channel = channel
    }
}

/// Why a record is not believed: never revokes anything; recorded (once per distinct body, counted) and counted in
/// `iap_store_notifications_total{result="refused_<code>"}`.
public struct NotificationRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// The store the record claims to be from, when that much could be told.
    public var store: Store?
    /// `malformed`, `unverified`, `other_application`, `other_environment`, or `not_configured` (a store whose
    /// refunds the worker is not configured to take).
    public var code: String
    /// One line saying why, never echoing a token, a key or a JWS.
    public var detail: String

    public init(store: Store?, code: String, detail: String) {
        self.store = store
        self.code = code
        self.detail = detail
    }

    public var description: String { "\(store?.rawValue ?? "unknown") notification refused (\(code)): \(detail)" }
}

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

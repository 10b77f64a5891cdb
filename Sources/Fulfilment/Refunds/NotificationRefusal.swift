import Foundation

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
    /// The notification id the record claims, not believed (Apple's `notificationUUID` from a payload whose signature
    /// did not verify, the id a Google notification about another app would have): what support searches with.
    public var claimedId: String?

    public init(store: Store?, code: String, detail: String, claimedId: String? = nil) {
        self.store = store
        self.code = code
        self.detail = detail
        self.claimedId = claimedId
    }

    public var description: String { "\(store?.rawValue ?? "unknown") notification refused (\(code)): \(detail)" }
}

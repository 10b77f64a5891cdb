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

    public init(store: Store?, code: String, detail: String) {
        self.store = store
        self.code = code
        self.detail = detail
    }

    public var description: String { "\(store?.rawValue ?? "unknown") notification refused (\(code)): \(detail)" }
}

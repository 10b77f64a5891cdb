import Foundation

/// An App Store Server API call that failed. `description` never holds the key, the token or an answer's body.
public struct AppStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case unauthorized
            case rateLimited = "rate_limited"
            case unavailable
            case invalidRequest = "invalid_request"
            case invalidResponse = "invalid_response"
            case configuration
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// 401: the key, key id, issuer id or bundle id is wrong or revoked. Waiting does not help.
        public static let unauthorized = Code(.unauthorized)
        /// 429: too many calls; try again later.
        public static let rateLimited = Code(.rateLimited)
        /// No answer, a broken connection, or a 5xx: try again later.
        public static let unavailable = Code(.unavailable)
        /// 4xx other than 401 and 429: Apple refuses this request as it is (Apple's `errorCode` says why).
        public static let invalidRequest = Code(.invalidRequest)
        /// An answer that is not the documented JSON.
        public static let invalidResponse = Code(.invalidResponse)
        /// The key cannot be used (not a P-256 private key): `refunds.apple.private_key_file` must change.
        public static let configuration = Code(.configuration)

        public var description: String { base.rawValue }
    }

    public var code: Code
    public var httpStatus: Int?
    /// Apple's numeric `errorCode`, when it gave one.
    public var appleErrorCode: Int64?
    /// One line, without secrets.
    public var message: String

    public init(_ code: Code, httpStatus: Int? = nil, appleErrorCode: Int64? = nil, _ message: String) {
        self.code = code
        self.httpStatus = httpStatus
        self.appleErrorCode = appleErrorCode
        self.message = message
    }

    /// Whether the same call later may succeed.
    public var isRetryable: Bool { code == .rateLimited || code == .unavailable || code == .invalidResponse }

    public var description: String {
        var text = "AppStoreError(\(code)"
        if let httpStatus { text += ", HTTP \(httpStatus)" }
        if let appleErrorCode { text += ", errorCode \(appleErrorCode)" }
        return text + "): \(message)"
    }
}

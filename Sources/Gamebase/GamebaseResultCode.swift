/// A Gamebase `header.resultCode`, with the codes the consume flow cares about named.
public struct GamebaseResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public init(_ rawValue: Int) { self.rawValue = rawValue }

    public static let success = Self(0)
    // IAP module
    public static let consumeFailed = Self(5000)
    public static let alreadyConsumed = Self(5018)
    public static let invalidParameter = Self(1100)
    public static let invalidJSONType = Self(5032)
    public static let unknownError = Self(9999)
    public static let invalidGamebaseProduct = Self(-4001002)
    // Common
    public static let missingParameter = Self(-4000002)
    public static let undefinedField = Self(-4000003)
    public static let invalidAppID = Self(-4010001)
    public static let invalidAppKey = Self(-4010002)
    public static let unauthenticated = Self(-4010003)
    public static let invalidSecretKey = Self(-4010004)
    public static let invalidContentType = Self(-4060001)
    public static let deprecatedAPIVersion = Self(-4060002)
    public static let unsupportedAPIVersion = Self(-4060003)
    public static let apiVersionNoLongerSupported = Self(-4000007)
    public static let internalDBError = Self(-4090001)
    public static let malformedJSON = Self(-4150001)
    public static let internalSystemError = Self(-5000001)
    // Gateway
    public static let gatewayInvalidAppID = Self(-4010202)
    public static let productNotEnabled = Self(-4040201)
    public static let undefinedAPI = Self(-4040202)
    public static let sandboxMismatch = Self(-4120201)
    public static let gatewayInternalError = Self(-5000201)
    // Member
    public static let memberNotFound = Self(-4040401)

    public var description: String { String(rawValue) }

    /// How the consume flow treats a failure with this code (contract §8.1).
    public var failureKind: GamebaseFailureKind {
        switch self {
        case .success:
            // A success code on an envelope that says it failed: never documented; retrying is the safe choice.
            return .transient
        case .alreadyConsumed:
            return .alreadyConsumed
        case .invalidAppID, .invalidAppKey, .unauthenticated, .invalidSecretKey, .gatewayInvalidAppID,
            .productNotEnabled, .sandboxMismatch, .undefinedAPI, .unsupportedAPIVersion, .apiVersionNoLongerSupported,
            .invalidContentType:
            // Every call would fail the same way: the deployment is wrong, not the purchase.
            return .configuration
        case .unknownError:
            return .transient
        default:
            break
        }
        switch rawValue {
        case -4090004 ... -4090001,  // internal DB error
            -5000015 ... -5000001,  // internal system error
            -5000208 ... -5000201:  // gateway internal error
            return .transient
        case -5999999 ... -5000000:
            // Undocumented server-side errors (5xx family): retry, bounded.
            return .transient
        default:
            return .permanent
        }
    }
}

/// The caller's view of a Gamebase failure.
public enum GamebaseFailureKind: String, Sendable, Hashable, CaseIterable {
    /// `5018`: the payment was consumed already. After a grant, this is success.
    case alreadyConsumed = "already_consumed"
    /// The request is wrong for this purchase; the same request will fail again.
    case permanent
    /// The deployment is wrong (secret key, app id, product not enabled, sandbox/real, base URL): every
    /// request will fail until an operator fixes it. Stop consuming rather than reject purchases.
    case configuration
    /// Worth retrying with backoff: server errors, timeouts, connection failures, non-200 answers, non-JSON bodies.
    case transient
}

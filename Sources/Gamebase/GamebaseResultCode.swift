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
    public static let invalidGamebaseProduct = Self(-4_001_002)
    // Common
    public static let missingParameter = Self(-4_000_002)
    public static let undefinedField = Self(-4_000_003)
    public static let invalidAppID = Self(-4_010_001)
    public static let invalidAppKey = Self(-4_010_002)
    public static let unauthenticated = Self(-4_010_003)
    public static let invalidSecretKey = Self(-4_010_004)
    public static let invalidContentType = Self(-4_060_001)
    public static let deprecatedAPIVersion = Self(-4_060_002)
    public static let unsupportedAPIVersion = Self(-4_060_003)
    public static let apiVersionNoLongerSupported = Self(-4_000_007)
    public static let internalDBError = Self(-4_090_001)
    public static let malformedJSON = Self(-4_150_001)
    public static let internalSystemError = Self(-5_000_001)
    // Gateway
    public static let gatewayInvalidAppID = Self(-4_010_202)
    public static let productNotEnabled = Self(-4_040_201)
    public static let undefinedAPI = Self(-4_040_202)
    public static let sandboxMismatch = Self(-4_120_201)
    public static let gatewayInternalError = Self(-5_000_201)
    // Member
    public static let memberNotFound = Self(-4_040_401)

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
        case -4_090_004 ... -4_090_001,  // internal DB error
            -5_000_015 ... -5_000_001,  // internal system error
            -5_000_208 ... -5_000_201:  // gateway internal error
            return .transient
        case -5_999_999 ... -5_000_000:
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

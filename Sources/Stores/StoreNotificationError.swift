import Fulfilment

/// Why a store notification was refused. `description` never contains a token, a key or the notification's body.
public struct StoreNotificationError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Not a notification of a known shape: not JSON, a field missing or of the wrong type, over a limit.
        public static let malformed = Code(rawValue: "malformed")
        /// About another app than the one configured (bundle id or package name).
        public static let otherApplication = Code(rawValue: "other_application")
        /// From another environment than the one configured (Apple's sandbox against production).
        public static let otherEnvironment = Code(rawValue: "other_environment")
        /// An Apple notification whose signature or certificate chain does not verify.
        public static let unverified = Code(rawValue: "unverified")
    }

    public var code: Code
    public var detail: String
    public var store: Store
    /// The notification id the record claims, when it could be read though not believed.
    public var claimedId: String?

    public init(_ code: Code, store: Store, _ detail: String, claimedId: String? = nil) {
        self.code = code
        self.store = store
        self.detail = detail
        self.claimedId = claimedId
    }

    public var description: String { "\(store) notification refused (\(code)): \(detail)" }
}

/// Where and how the client reaches Gamebase.
public struct GamebaseConfiguration: Sendable {
    /// `https://api-gamebase.nhncloudservice.com` in production.
    public var baseURL: String
    /// The NHN Cloud project id.
    public var appID: String
    /// The Gamebase console's secret key; never logged or shown.
    public var secretKey: Secret
    /// Timeout of Get Payment Transaction and List Consumables calls.
    public var timeoutMilliseconds: Int
    /// Timeout of Consume calls. The docs ask for at least 10 s (contract §10).
    public var consumeTimeoutMilliseconds: Int
    /// Connections kept to Gamebase at most (keep-alive pool).
    public var maxConnections: Int

    public static let defaultBaseURL = "https://api-gamebase.nhncloudservice.com"

    public init(
        baseURL: String = Self.defaultBaseURL, appID: String, secretKey: Secret, timeoutMilliseconds: Int = 10_000,
        consumeTimeoutMilliseconds: Int? = nil, maxConnections: Int = 64
    ) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.appID = appID
        self.secretKey = secretKey
        self.timeoutMilliseconds = timeoutMilliseconds
        self.consumeTimeoutMilliseconds = consumeTimeoutMilliseconds ?? max(10_000, timeoutMilliseconds)
        self.maxConnections = maxConnections
    }
}

/// A secret string: its description is redacted, so interpolating it into a log or error shows nothing.
public struct Secret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    ExpressibleByStringLiteral
{
    /// The secret itself; read it only where it is sent.
    public let revealed: String
    public init(_ value: String) { self.revealed = value }
    public init(stringLiteral value: String) { self.revealed = value }
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var isEmpty: Bool { revealed.isEmpty }
}

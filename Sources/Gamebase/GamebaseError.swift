/// An error from the Gamebase client.
///
/// `description` never contains the secret key, access tokens or response bodies.
public struct GamebaseError: Error, CustomStringConvertible, Sendable, Equatable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case resultCode = "result_code"
            case timeout
            case connection
            case httpStatus = "http_status"
            case invalidResponse = "invalid_response"
            case invalidRequest = "invalid_request"
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// Gamebase answered with `isSuccessful: false`; see ``GamebaseError/resultCode``.
        public static let resultCode = Code(.resultCode)
        /// No answer within the call's timeout. For Consume the outcome is unknown: it may have applied.
        public static let timeout = Code(.timeout)
        /// The connection could not be made or broke.
        public static let connection = Code(.connection)
        /// An HTTP status other than 200 (Gamebase itself always answers 200; a proxy may not).
        public static let httpStatus = Code(.httpStatus)
        /// A body that is not the documented JSON envelope.
        public static let invalidResponse = Code(.invalidResponse)
        /// The request could not be built (e.g. an empty access token).
        public static let invalidRequest = Code(.invalidRequest)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// The API called: `payment_transaction`, `consume` or `consumable`.
    public let api: String
    /// Gamebase's `header.resultCode`, when it answered with one.
    public let resultCode: GamebaseResultCode?
    /// Gamebase's `header.resultMessage`, when it answered with one (free text from Gamebase; never parsed).
    public let resultMessage: String?
    /// The HTTP status, for `.httpStatus`.
    public let httpStatus: Int?
    /// The `X-TCGB-Transaction-Id` of the logical operation, for correlating with Gamebase's logs.
    public let transactionID: String
    /// A one-line explanation without secrets.
    public let message: String
    public let file: String
    public let line: UInt

    public init(
        code: Code, api: String, resultCode: GamebaseResultCode? = nil, resultMessage: String? = nil,
        httpStatus: Int? = nil, transactionID: String, message: String, file: String = #fileID, line: UInt = #line
    ) {
        self.code = code
        self.api = api
        self.resultCode = resultCode
        self.resultMessage = resultMessage
        self.httpStatus = httpStatus
        self.transactionID = transactionID
        self.message = message
        self.file = file
        self.line = line
    }

    /// How the consume flow should treat this failure.
    public var kind: GamebaseFailureKind {
        switch code {
        case .resultCode: resultCode?.failureKind ?? .transient
        case .invalidRequest: .permanent
        default: .transient
        }
    }

    public var isRetryable: Bool { kind == .transient }

    public var description: String {
        var text = "GamebaseError(\(code), api: \(api)"
        if let resultCode { text += ", resultCode: \(resultCode)" }
        if let httpStatus { text += ", httpStatus: \(httpStatus)" }
        text += ", kind: \(kind.rawValue), transactionId: \(transactionID)): \(message)"
        return text
    }
}

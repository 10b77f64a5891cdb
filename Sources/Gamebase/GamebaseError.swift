import Wire

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

    /// The fields, in one box its copies share (``CopyOnWrite``). An error crosses many suspension points by value: in a
    /// typed `throws(GamebaseError)`, in an outcome, in a breaker's transition. Inline it was about 140 bytes of each
    /// such slot, and the async frames of a purchase in flight held dozens of them (issue #39).
    private let fields: CopyOnWrite<Fields>

    struct Fields: Sendable, Equatable {
        let code: Code
        let api: String
        let resultCode: GamebaseResultCode?
        let resultMessage: String?
        let httpStatus: Int?
        let transactionID: String
        let message: String
        let file: String
        let line: UInt
    }

    public var code: Code { fields.value.code }
    /// The API called: `payment_transaction`, `consume` or `consumable`.
    public var api: String { fields.value.api }
    /// Gamebase's `header.resultCode`, when it answered with one.
    public var resultCode: GamebaseResultCode? { fields.value.resultCode }
    /// Gamebase's `header.resultMessage`, when it answered with one (free text from Gamebase; never parsed).
    public var resultMessage: String? { fields.value.resultMessage }
    /// The HTTP status, for `.httpStatus`.
    public var httpStatus: Int? { fields.value.httpStatus }
    /// The `X-TCGB-Transaction-Id` of the logical operation, for correlating with Gamebase's logs.
    public var transactionID: String { fields.value.transactionID }
    /// A one-line explanation without secrets.
    public var message: String { fields.value.message }
    public var file: String { fields.value.file }
    public var line: UInt { fields.value.line }

    public init(
        code: Code, api: String, resultCode: GamebaseResultCode? = nil, resultMessage: String? = nil,
        httpStatus: Int? = nil, transactionID: String, message: String, file: String = #fileID, line: UInt = #line
    ) {
        fields = CopyOnWrite(
            Fields(
                code: code, api: api, resultCode: resultCode, resultMessage: resultMessage, httpStatus: httpStatus,
                transactionID: transactionID, message: message, file: file, line: line))
    }

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

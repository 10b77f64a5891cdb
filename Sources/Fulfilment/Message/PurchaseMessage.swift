import Crypto
import Foundation
import Gamebase
import Wire

/// A purchase-completed message (DESIGN §2): what a game server publishes for one purchase.
///
/// The SDK's purchase receipt can be forwarded as it is: unknown fields are ignored.
public struct PurchaseMessage: Sendable, Hashable {
    public var userId: String
    public var paymentSeq: String
    /// The SDK's `purchaseToken` (Gamebase's `accessToken`). A secret: never logged.
    public var purchaseToken: String
    /// Advisory only: the product granted is always Gamebase's.
    public var gamebaseProductId: String?
    public var storeCode: String?
    public var payload: String?

    public init(
        userId: String, paymentSeq: String, purchaseToken: String, gamebaseProductId: String? = nil,
        storeCode: String? = nil, payload: String? = nil
    ) {
        self.userId = userId
        self.paymentSeq = paymentSeq
        self.purchaseToken = purchaseToken
        self.gamebaseProductId = gamebaseProductId
        self.storeCode = storeCode
        self.payload = payload
    }

    /// Field limits, in UTF-8 bytes.
    public enum Limits {
        public static let userId = 256
        public static let paymentSeq = 128
        public static let purchaseToken = 8_192
        public static let gamebaseProductId = 256
        public static let storeCode = 64
        public static let payload = 32_768
        /// Deeper JSON is refused.
        public static let nesting = 32
    }

    /// The key that identifies this message's judgement: (paymentSeq, userId, hash of purchaseToken). SHA-256 in
    /// lower-case hex (swift-crypto); stored in ledgers, so it must never change.
    public var tokenHash: String { SHA256.hex(purchaseToken) }

    /// A short, stable hash of (userId, purchaseToken) for event ids; reveals neither. The first 16 hex digits of
    /// the SHA-256 of `userId + "\n" + purchaseToken`; part of event ids, so it must never change.
    public var claimHash: String { String(SHA256.hex("\(userId)\n\(purchaseToken)").prefix(16)) }
}

/// Why a message is malformed. `description` never contains the message's values.
public struct MalformedMessage: Error, Sendable, Hashable, CustomStringConvertible {
    public var problem: String
    /// The paymentSeq, when one could be read despite the problem.
    public var paymentSeq: String?
    /// The userId, when one could be read.
    public var userId: String?
    public var description: String { problem }
}

extension PurchaseMessage {
    /// The fields the flow reads, in the order their problems are reported.
    private enum Field: String, CaseIterable {
        case userId, paymentSeq, purchaseToken, gamebaseProductId, storeCode, payload

        var limit: Int {
            switch self {
            case .userId: Limits.userId
            case .paymentSeq: Limits.paymentSeq
            case .purchaseToken: Limits.purchaseToken
            case .gamebaseProductId: Limits.gamebaseProductId
            case .storeCode: Limits.storeCode
            case .payload: Limits.payload
            }
        }

        var isRequired: Bool { self == .userId || self == .paymentSeq || self == .purchaseToken }
    }

    /// A field's value as read: a string, `null`, or some other JSON value.
    private enum Value {
        case string(String)
        case null
        case notString
    }

    /// One value per field, in place (a dictionary cost several allocations per message).
    private struct FieldSlots<Element> {
        private var slots: (Element?, Element?, Element?, Element?, Element?, Element?) = (nil, nil, nil, nil, nil, nil)

        subscript(field: Field) -> Element? {
            get {
                switch field {
                case .userId: slots.0
                case .paymentSeq: slots.1
                case .purchaseToken: slots.2
                case .gamebaseProductId: slots.3
                case .storeCode: slots.4
                case .payload: slots.5
                }
            }
            set {
                switch field {
                case .userId: slots.0 = newValue
                case .paymentSeq: slots.1 = newValue
                case .purchaseToken: slots.2 = newValue
                case .gamebaseProductId: slots.3 = newValue
                case .storeCode: slots.4 = newValue
                case .payload: slots.5 = newValue
                }
            }
        }
    }

    /// Parses and validates a message value (with the project's JSON reader: strict RFC 8259, no Foundation
    /// object graph).
    ///
    /// - Parameter maxBytes: `worker.max_message_bytes`.
    public static func parse(_ bytes: [UInt8], maxBytes: Int = 65_536) -> Result<PurchaseMessage, MalformedMessage> {
        guard bytes.count <= maxBytes else {
            return malformed("message is \(bytes.count) bytes, over the \(maxBytes)-byte limit")
        }
        guard !bytes.isEmpty else { return malformed("message is empty") }
        guard UTF8Text.isValid(bytes) else { return malformed("message is not valid UTF-8") }

        var values = FieldSlots<Value>()
        var duplicate: Field?
        var reader = JSONReader(bytes, maxDepth: Limits.nesting)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                guard let field = Field(rawValue: key) else { return try reader.skipValue() }
                let value: Value =
                    try reader.readNull() ? .null : try reader.readStringOrSkip().map { .string($0) } ?? .notString
                // A field given twice is refused: parsers disagree on which one counts, and a game server that
                // checked the first must not see the worker act on the second.
                if values[field] != nil, duplicate == nil { duplicate = field }
                values[field] = value
            }
            try reader.finish()
        } catch {
            var whole = JSONReader(bytes, maxDepth: Limits.nesting)
            if (try? whole.skipValue()) != nil, (try? whole.finish()) != nil {
                return malformed("message is not a JSON object")
            }
            return malformed(
                error.problem.hasPrefix("nested deeper")
                    ? "JSON nested deeper than \(Limits.nesting) levels" : "message is not JSON")
        }

        func plain(_ field: Field) -> String? {
            if case .string(let value) = values[field] { return plainIdentifier(value) }
            return nil
        }
        func failure(_ problem: String) -> Result<PurchaseMessage, MalformedMessage> {
            .failure(MalformedMessage(problem: problem, paymentSeq: plain(.paymentSeq), userId: plain(.userId)))
        }
        if let duplicate { return failure("\(duplicate.rawValue) appears more than once") }
        var strings = FieldSlots<String>()
        for field in Field.allCases {
            switch values[field] {
            case nil, .null:
                if field.isRequired { return failure("\(field.rawValue) is missing") }
            case .notString:
                return failure("\(field.rawValue) is not a string")
            case .string(let value):
                if field.isRequired {
                    // A first byte that is ASCII and no white space settles it without Foundation's trimming.
                    let plainStart = value.utf8.first.map { $0 > 0x20 && $0 < 0x7F } ?? false
                    guard plainStart || !value.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                        return failure("\(field.rawValue) is empty")
                    }
                }
                guard value.utf8.count <= field.limit else {
                    return failure("\(field.rawValue) is longer than \(field.limit) bytes")
                }
                if field.isRequired, value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
                {
                    return failure("\(field.rawValue) contains control characters")
                }
                if !value.isEmpty { strings[field] = value }
            }
        }
        guard let userId = strings[.userId], let paymentSeq = strings[.paymentSeq], let token = strings[.purchaseToken]
        else {
            return failure("a required field is missing")
        }
        return .success(
            PurchaseMessage(
                userId: userId, paymentSeq: paymentSeq, purchaseToken: token,
                gamebaseProductId: strings[.gamebaseProductId],
                storeCode: strings[.storeCode], payload: strings[.payload]))
    }

    private static func malformed(_ problem: String) -> Result<PurchaseMessage, MalformedMessage> {
        .failure(MalformedMessage(problem: problem))
    }

    /// A value fit to name a message in events and logs: short, no control characters.
    public static func plainIdentifier(_ value: String) -> String? {
        guard !value.isEmpty, value.utf8.count <= Limits.paymentSeq,
            !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { return nil }
        return value
    }
}

import Crypto
import Foundation

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
        /// Deeper JSON is refused before it is parsed.
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
    /// Parses and validates a message value.
    ///
    /// - Parameter maxBytes: `worker.max_message_bytes`.
    public static func parse(_ bytes: [UInt8], maxBytes: Int = 65_536) -> Result<PurchaseMessage, MalformedMessage> {
        func malformed(_ problem: String, _ object: [String: Any]? = nil) -> Result<PurchaseMessage, MalformedMessage> {
            .failure(
                MalformedMessage(
                    problem: problem, paymentSeq: (object?["paymentSeq"] as? String).flatMap(Self.plainIdentifier),
                    userId: (object?["userId"] as? String).flatMap(Self.plainIdentifier)))
        }
        guard bytes.count <= maxBytes else { return malformed("message is \(bytes.count) bytes, over the \(maxBytes)-byte limit") }
        guard !bytes.isEmpty else { return malformed("message is empty") }
        guard String(validating: bytes, as: UTF8.self) != nil else { return malformed("message is not valid UTF-8") }
        guard nestingDepth(bytes) <= Limits.nesting else { return malformed("JSON nested deeper than \(Limits.nesting) levels") }
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: Data(bytes), options: [])
        } catch {
            return malformed("message is not JSON")
        }
        guard let object = parsed as? [String: Any] else { return malformed("message is not a JSON object") }

        func required(_ name: String, limit: Int) -> Result<String, MalformedMessage> {
            guard let raw = object[name], !(raw is NSNull) else {
                return .failure(malformed("\(name) is missing", object).failureValue!)
            }
            guard let value = raw as? String, !(raw is NSNumber) else {
                return .failure(malformed("\(name) is not a string", object).failureValue!)
            }
            guard !value.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                return .failure(malformed("\(name) is empty", object).failureValue!)
            }
            guard value.utf8.count <= limit else {
                return .failure(malformed("\(name) is longer than \(limit) bytes", object).failureValue!)
            }
            guard !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                return .failure(malformed("\(name) contains control characters", object).failureValue!)
            }
            return .success(value)
        }
        func optional(_ name: String, limit: Int) -> Result<String?, MalformedMessage> {
            guard let raw = object[name], !(raw is NSNull) else { return .success(nil) }
            guard let value = raw as? String, !(raw is NSNumber) else {
                return .failure(malformed("\(name) is not a string", object).failureValue!)
            }
            guard value.utf8.count <= limit else {
                return .failure(malformed("\(name) is longer than \(limit) bytes", object).failureValue!)
            }
            return .success(value.isEmpty ? nil : value)
        }
        do {
            return .success(
                PurchaseMessage(
                    userId: try required("userId", limit: Limits.userId).get(),
                    paymentSeq: try required("paymentSeq", limit: Limits.paymentSeq).get(),
                    purchaseToken: try required("purchaseToken", limit: Limits.purchaseToken).get(),
                    gamebaseProductId: try optional("gamebaseProductId", limit: Limits.gamebaseProductId).get(),
                    storeCode: try optional("storeCode", limit: Limits.storeCode).get(),
                    payload: try optional("payload", limit: Limits.payload).get()))
        } catch {
            return .failure(error)
        }
    }

    /// The deepest nesting of arrays and objects, counted without parsing (strings are skipped).
    static func nestingDepth(_ bytes: [UInt8]) -> Int {
        var depth = 0
        var deepest = 0
        var inString = false
        var escaped = false
        for byte in bytes {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                deepest = max(deepest, depth)
            case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
            default: break
            }
        }
        return deepest
    }

    /// A value fit to name a message in events and logs: short, no control characters.
    static func plainIdentifier(_ value: String) -> String? {
        guard !value.isEmpty, value.utf8.count <= Limits.paymentSeq,
            !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { return nil }
        return value
    }
}

extension Result {
    fileprivate var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

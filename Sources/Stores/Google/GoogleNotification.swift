import Crypto
import Foundation
import Fulfilment
import Wire

/// Google Play's real-time developer notifications (RTDN) as a Kafka record carries them: the notification's JSON
/// (what Kafka Connect's Pub/Sub source connector writes), the Pub/Sub message (`{"data": base64, "messageId": …}`) or
/// the push envelope around it (`{"message": {…}, "subscription": …}`).
///
/// A `voidedPurchaseNotification` is a refund (or a chargeback, or a revoked purchase: Google voids all three); the
/// other notifications are read, counted and otherwise left alone. The purchase token is kept only as its hash.
public enum GoogleNotification {
    /// Limits, in UTF-8 bytes.
    public enum Limits {
        /// The whole record, and the notification inside an envelope.
        public static let bytes = 65_536
        /// Google's purchase tokens are a few hundred bytes.
        public static let purchaseToken = 8_192
        /// An order id, a message id, a package name.
        public static let identifier = 256
        /// Deeper JSON is refused.
        public static let nesting = 16
    }

    /// The notification members Google defines, by the kind each is for this worker.
    static let kinds: [String: StoreNotification.Kind] = [
        "voidedPurchaseNotification": .refund,
        "oneTimeProductNotification": .other,
        "subscriptionNotification": .other,
        "testNotification": .other,
    ]

    /// Reads one record's value. Google's notifications are not signed: what the topic carries is believed as far as
    /// the topic's write access is controlled (``StoreNotification/Authenticity/trustedChannel``).
    ///
    /// - Parameter packageName: `refunds.google.package_name`; a notification about another app is refused.
    public static func parse(
        _ bytes: [UInt8], packageName: String
    ) -> Result<StoreNotification, StoreNotificationError> {
        do {
            let (notification, messageId) = try unwrap(bytes)
            var read = try developerNotification(notification)
            read.deliveryId = messageId
            if read.application != packageName {
                return .failure(
                    StoreNotificationError(
                        .otherApplication, store: .google,
                        "about package \(StoreText.printable(read.application ?? "-")), not the configured \(packageName)",
                        claimedId: read.notificationId))
            }
            return .success(read)
        } catch {
            return .failure(error)
        }
    }

    static func refused(_ detail: String) -> StoreNotificationError {
        StoreNotificationError(.malformed, store: .google, detail)
    }

    /// The members of a JSON object by name, each value's bytes kept to be read later; a name given twice is refused.
    static func members(
        of bytes: ArraySlice<UInt8>, what: String
    ) throws(StoreNotificationError) -> [String: ArraySlice<UInt8>] {
        guard bytes.count <= Limits.bytes else { throw refused("\(what) is over \(Limits.bytes) bytes") }
        var members: [String: ArraySlice<UInt8>] = [:]
        var duplicate: String?
        var reader = JSONReader(bytes, maxDepth: Limits.nesting)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                let value = try reader.captureValue()
                if members.updateValue(value, forKey: key) != nil, duplicate == nil { duplicate = key }
            }
            try reader.finish()
        } catch {
            throw refused("\(what) is not a JSON object (\(error.problem))")
        }
        // Parsers disagree on which of two values counts: one Google's tooling checked must not be the other.
        if let duplicate { throw refused("\(what) has \(StoreText.printable(duplicate)) more than once") }
        return members
    }

    /// The notification's members and, when it came in a Pub/Sub message, the message's id (a bare notification is
    /// read once: its members are the record's).
    private static func unwrap(
        _ bytes: [UInt8]
    ) throws(StoreNotificationError) -> ([String: ArraySlice<UInt8>], String?) {
        guard !bytes.isEmpty else { throw refused("the record is empty") }
        guard bytes.count <= Limits.bytes else { throw refused("the record is over \(Limits.bytes) bytes") }
        guard UTF8Text.isValid(bytes) else { throw refused("the record is not UTF-8") }
        let outer = try members(of: bytes[...], what: "the record")
        var message = outer
        if let envelope = outer["message"] {
            message = try members(of: envelope, what: "the envelope's message")
        }
        guard let data = message["data"] else {
            if outer["message"] != nil { throw refused("the envelope's message has no data") }
            return (outer, nil)
        }
        let encoded = try string(data, "data", limit: Limits.bytes * 4 / 3 + 4)
        guard let decoded = Data(base64Encoded: encoded) else { throw refused("data is not base64") }
        let messageId = try message["messageId"].map { value throws(StoreNotificationError) in
            try identifier(value, "messageId")
        }
        let inner = [UInt8](decoded)
        guard UTF8Text.isValid(inner) else { throw refused("data is not UTF-8 text") }
        return (try members(of: inner[...], what: "the notification"), messageId)
    }

    private static func developerNotification(
        _ fields: [String: ArraySlice<UInt8>]
    ) throws(StoreNotificationError) -> StoreNotification {
        guard let packageValue = fields["packageName"] else { throw refused("packageName is missing") }
        let packageName = try identifier(packageValue, "packageName")
        guard let timeValue = fields["eventTimeMillis"] else { throw refused("eventTimeMillis is missing") }
        let eventTime = try millis(timeValue, "eventTimeMillis")
        let present = kinds.keys.filter { fields[$0] != nil }.sorted()
        guard present.count <= 1 else {
            throw refused("the notification has more than one kind: \(present.joined(separator: ", "))")
        }
        let occurredAt = Date(timeIntervalSince1970: Double(eventTime) / 1_000)
        guard let member = present.first, let kind = kinds[member], let body = fields[member] else {
            // A kind Google added since: counted as other, never refused.
            return StoreNotification(
                store: .google, kind: .other, storeType: "unknown",
                notificationId: derivedId(packageName, eventTime, "unknown", []), authenticity: .trustedChannel,
                application: packageName, occurredAt: occurredAt)
        }
        let inner = try members(of: body, what: member)
        guard kind == .refund else {
            // Nothing in these names them uniquely but their whole body (which may hold a token: only hashed).
            return StoreNotification(
                store: .google, kind: kind, storeType: member,
                notificationId: derivedId(
                    packageName, eventTime, member, [SHA256.hex(String(decoding: body, as: UTF8.self))]),
                authenticity: .trustedChannel, application: packageName, occurredAt: occurredAt)
        }
        guard let tokenValue = inner["purchaseToken"] else { throw refused("purchaseToken is missing") }
        let token = try string(tokenValue, "purchaseToken", limit: Limits.purchaseToken)
        guard !token.isEmpty else { throw refused("purchaseToken is empty") }
        guard let orderValue = inner["orderId"] else { throw refused("orderId is missing") }
        let orderId = try identifier(orderValue, "orderId")
        let refundType = try inner["refundType"].map { value throws(StoreNotificationError) in
            try integer(value, "refundType")
        }
        let tokenHash = SHA256.hex(token)
        return StoreNotification(
            store: .google, kind: .refund, storeType: member,
            notificationId: derivedId(packageName, eventTime, member, [orderId, tokenHash]),
            authenticity: .trustedChannel, paymentId: orderId, purchaseTokenHash: tokenHash, application: packageName,
            reason: refundType.map(refundReason), occurredAt: occurredAt)
    }

    /// Google's name for a `refundType`.
    static func refundReason(_ refundType: Int64) -> String {
        switch refundType {
        case 1: "REFUND_TYPE_FULL_REFUND"
        case 2: RevocationRecord.googlePartialRefund
        default: "refundType \(refundType)"
        }
    }

    /// The id of a notification that came without its Pub/Sub message: a hash of what it says, so the same
    /// notification delivered twice has one id.
    static func derivedId(_ packageName: String, _ eventTime: Int64, _ member: String, _ parts: [String]) -> String {
        let text = ([packageName, String(eventTime), member] + parts).joined(separator: "\n")
        return "google:" + SHA256.hex(text).prefix(32)
    }

    // MARK: Values

    static func string(
        _ value: ArraySlice<UInt8>, _ name: String, limit: Int
    ) throws(StoreNotificationError) -> String {
        var reader = JSONReader(value, maxDepth: 1)
        guard let text = try? reader.readStringOrSkip() else { throw refused("\(name) is not a string") }
        guard text.utf8.count <= limit else { throw refused("\(name) is longer than \(limit) bytes") }
        return text
    }

    /// A short string fit for logs and ids (``StoreText/isPlainIdentifier(_:limit:)``).
    static func identifier(_ value: ArraySlice<UInt8>, _ name: String) throws(StoreNotificationError) -> String {
        let text = try string(value, name, limit: Limits.identifier)
        guard !text.isEmpty else { throw refused("\(name) is empty") }
        guard StoreText.isPlainIdentifier(text, limit: Limits.identifier) else {
            throw refused("\(name) has white space at an end or control characters")
        }
        return text
    }

    static func integer(_ value: ArraySlice<UInt8>, _ name: String) throws(StoreNotificationError) -> Int64 {
        var reader = JSONReader(value, maxDepth: 1)
        guard let number = try? reader.readInt64() else { throw refused("\(name) is not an integer") }
        return number
    }

    /// Milliseconds since 1970, as Google writes them: a string of digits (its JSON encoding of a 64-bit number) or a
    /// number.
    static func millis(_ value: ArraySlice<UInt8>, _ name: String) throws(StoreNotificationError) -> Int64 {
        var reader = JSONReader(value, maxDepth: 1)
        let number: Int64?
        if let text = try? reader.readStringOrSkip() {
            number = text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) ? Int64(text) : nil
        } else {
            var again = JSONReader(value, maxDepth: 1)
            number = try? again.readInt64()
        }
        guard let number, number >= 0, number <= StoreText.latestMillis else {
            throw refused("\(name) is not a time in milliseconds since 1970")
        }
        return number
    }
}

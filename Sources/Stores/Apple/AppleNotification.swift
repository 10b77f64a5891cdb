import Foundation
import Fulfilment
import Wire

/// App Store Server Notifications V2, as the notification history answers them and as a studio's own endpoint
/// receives them (`{"signedPayload": …}`): a notification is believed only once its JWS and its transaction's JWS
/// verify (``AppleJWSVerifier``) and both name the configured bundle id and environment.
public enum AppleNotification {
    /// What the notification types mean for a grant; any other type is `.other`.
    static let kinds: [String: StoreNotification.Kind] = [
        "REFUND": .refund,
        "REFUND_REVERSED": .refundReversed,
        "REFUND_DECLINED": .refundDeclined,
        "CONSUMPTION_REQUEST": .consumptionRequest,
    ]

    /// Apple's environments by the configuration's names (`refunds.apple.environment`).
    public enum Environment: String, Sendable, CaseIterable {
        case production
        case sandbox

        /// As Apple writes it in payloads.
        public var appleName: String { self == .production ? "Production" : "Sandbox" }
    }

    /// The `signedPayload` of a notification body a studio received itself.
    public static func signedPayload(ofBody bytes: [UInt8]) throws(StoreNotificationError) -> String {
        guard bytes.count <= AppleJWSVerifier.Limits.jws + 1_024 else {
            throw AppleJWSVerifier.malformed("the body is over \(AppleJWSVerifier.Limits.jws + 1_024) bytes")
        }
        var signed: String?
        var reader = JSONReader(bytes, maxDepth: AppleJWSVerifier.Limits.nesting)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                if key == "signedPayload" { signed = try reader.readStringOrSkip() } else { try reader.skipValue() }
            }
            try reader.finish()
        } catch {
            throw AppleJWSVerifier.malformed("the body is not a JSON object")
        }
        guard let signed, !signed.isEmpty else { throw AppleJWSVerifier.malformed("the body has no signedPayload") }
        return signed
    }

    /// The `notificationUUID` a `signedPayload` claims, read without verifying anything (for a refused one, so support
    /// can find the refusal by the id Apple shows): `nil` unless the payload is a JSON object whose `notificationUUID`
    /// is 1 to 64 ASCII letters, digits and hyphens.
    public static func claimedUUID(of signedPayload: String) -> String? {
        let parts = signedPayload.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1].count <= AppleJWSVerifier.Limits.jws, let payload = Base64URL.decode(parts[1])
        else { return nil }
        var uuid: String?
        var reader = JSONReader(payload, maxDepth: AppleJWSVerifier.Limits.nesting)
        try? reader.readObject { reader, key throws(JSONReader.Failure) in
            if key == "notificationUUID" { uuid = try reader.readStringOrSkip() } else { try reader.skipValue() }
        }
        guard let uuid, (1...64).contains(uuid.utf8.count),
            uuid.utf8.allSatisfy({ $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") })
        else { return nil }
        return uuid
    }

    /// Verifies and reads one notification's `signedPayload`.
    ///
    /// - Parameter receivedAt: when it was received (``AppleJWSVerifier/payload(of:receivedAt:)``).
    public static func read(
        signedPayload: String, verifier: AppleJWSVerifier, bundleId: String, environment: Environment,
        receivedAt: Date
    ) async throws(StoreNotificationError) -> StoreNotification {
        let notification = try Fields(
            try await verifier.payload(of: signedPayload, receivedAt: receivedAt), what: "the notification")
        let type = try notification.string("notificationType")
        let subtype = try notification.optionalString("subtype")
        let uuid = try notification.identifier("notificationUUID")
        let signedDate = try notification.millis("signedDate")
        let kind = kinds[type] ?? .other
        let storeType = subtype.map { "\(type)/\($0)" } ?? type
        func other() -> StoreNotification {
            StoreNotification(
                store: .apple, kind: .other, storeType: storeType, notificationId: uuid,
                authenticity: .signedByStore, application: bundleId, environment: environment.appleName,
                occurredAt: signedDate)
        }
        // Notifications about many transactions or none carry `summary`, `externalPurchaseToken` or `appData` instead
        // of `data`: only ever other, and about this app and environment when they say.
        guard let dataBytes = try notification.optionalObject("data") else {
            guard kind == .other else { throw AppleJWSVerifier.malformed("\(type) has no data") }
            for member in ["summary", "externalPurchaseToken", "appData"] {
                guard let bytes = try notification.optionalObject(member) else { continue }
                try check(
                    try Fields(bytes, what: "the notification's \(member)"), bundleId: bundleId,
                    environment: environment, required: false)
            }
            return other()
        }
        let data = try Fields(dataBytes, what: "the notification's data")
        try check(data, bundleId: bundleId, environment: environment)
        guard let signedTransaction = try data.optionalString("signedTransactionInfo") else {
            guard kind == .other else { throw AppleJWSVerifier.malformed("\(type) has no signedTransactionInfo") }
            return other()
        }
        let transaction = try Fields(
            try await verifier.payload(of: signedTransaction, receivedAt: receivedAt),
            what: "the notification's transaction")
        try check(transaction, bundleId: bundleId, environment: environment)
        let revokedAt = try transaction.optionalMillis("revocationDate")
        let reason = try transaction.optionalInteger("revocationReason").map { "revocationReason \($0)" }
        return StoreNotification(
            store: .apple, kind: kind, storeType: storeType, notificationId: uuid, authenticity: .signedByStore,
            paymentId: try transaction.identifier("transactionId"), application: bundleId,
            environment: environment.appleName, productId: try transaction.optionalString("productId"),
            reason: reason, occurredAt: kind == .refund ? revokedAt ?? signedDate : signedDate)
    }

    /// Both the notification's data and its transaction must name the configured app and environment (`required`:
    /// else only when they name one).
    private static func check(
        _ fields: Fields, bundleId: String, environment: Environment, required: Bool = true
    ) throws(StoreNotificationError) {
        let named = required ? try fields.string("bundleId") : try fields.optionalString("bundleId") ?? bundleId
        guard named == bundleId else {
            throw StoreNotificationError(
                .otherApplication, store: .apple,
                "\(fields.what) is about bundle \(StoreText.printable(named)), not the configured \(bundleId)")
        }
        let stated =
            required
            ? try fields.string("environment") : try fields.optionalString("environment") ?? environment.appleName
        guard stated == environment.appleName else {
            throw StoreNotificationError(
                .otherEnvironment, store: .apple,
                "\(fields.what) is from \(StoreText.printable(stated)), not \(environment.appleName)")
        }
    }

    /// A JSON object's members by name, read on demand; a name given twice is refused.
    struct Fields {
        let what: String
        private var members: [String: ArraySlice<UInt8>] = [:]

        init(_ bytes: some Collection<UInt8>, what: String) throws(StoreNotificationError) {
            self.what = what
            var duplicate: String?
            var members: [String: ArraySlice<UInt8>] = [:]
            var reader = JSONReader(Array(bytes)[...], maxDepth: AppleJWSVerifier.Limits.nesting)
            do {
                try reader.readObject { reader, key throws(JSONReader.Failure) in
                    if members.updateValue(try reader.captureValue(), forKey: key) != nil { duplicate = key }
                }
                try reader.finish()
            } catch {
                throw AppleJWSVerifier.malformed("\(what) is not a JSON object")
            }
            if let duplicate {
                throw AppleJWSVerifier.malformed("\(what) has \(StoreText.printable(duplicate)) twice")
            }
            self.members = members
        }

        /// A member that must be an object when present.
        func optionalObject(_ name: String) throws(StoreNotificationError) -> ArraySlice<UInt8>? {
            guard let value = members[name] else { return nil }
            guard value.first == UInt8(ascii: "{") else {
                throw AppleJWSVerifier.malformed("\(what): \(name) is not an object")
            }
            return value
        }

        /// A member read by `read` when present and not null, refused as not `kind` when `read` cannot.
        private func optional<Value>(
            _ name: String, _ kind: String, _ read: (inout JSONReader) throws(JSONReader.Failure) -> Value
        ) throws(StoreNotificationError) -> Value? {
            guard let bytes = members[name] else { return nil }
            var reader = JSONReader(bytes)
            if (try? reader.readNull()) == true { return nil }
            do { return try read(&reader) } catch {
                throw AppleJWSVerifier.malformed("\(what): \(name) is not \(kind)")
            }
        }

        func optionalString(_ name: String) throws(StoreNotificationError) -> String? {
            try optional(name, "a string") { reader throws(JSONReader.Failure) in try reader.readString() }
        }

        func string(_ name: String) throws(StoreNotificationError) -> String {
            guard let text = try optionalString(name) else {
                throw AppleJWSVerifier.malformed("\(what) has no \(name)")
            }
            return text
        }

        /// A short string fit for ids and logs (``StoreText/isPlainIdentifier(_:limit:)``).
        func identifier(_ name: String) throws(StoreNotificationError) -> String {
            let text = try string(name)
            guard StoreText.isPlainIdentifier(text) else {
                throw AppleJWSVerifier.malformed("\(what): \(name) is not a plain identifier of 1 to 256 bytes")
            }
            return text
        }

        func optionalInteger(_ name: String) throws(StoreNotificationError) -> Int64? {
            try optional(name, "an integer") { reader throws(JSONReader.Failure) in try reader.readInt64() }
        }

        func optionalMillis(_ name: String) throws(StoreNotificationError) -> Date? {
            guard let millis = try optionalInteger(name) else { return nil }
            guard let date = StoreText.date(millis: millis) else {
                throw AppleJWSVerifier.malformed("\(what): \(name) is not a time in milliseconds since 1970")
            }
            return date
        }

        func millis(_ name: String) throws(StoreNotificationError) -> Date {
            guard let date = try optionalMillis(name) else {
                throw AppleJWSVerifier.malformed("\(what) has no \(name)")
            }
            return date
        }
    }
}

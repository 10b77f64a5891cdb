import Foundation
import Fulfilment
import Wire

/// One store's reader of the store-notifications topic's records: whether a record is that store's kind, and what it
/// says. ``StoreNotificationReader`` asks each configured store's in turn.
public protocol StoreBodyReader: Sendable {
    /// The store read.
    var store: Store { get }
    /// The largest record this store sends: a larger one is not read.
    var maxBytes: Int { get }
    /// Whether the record is this store's kind (read without keeping any value; one over ``maxBytes`` is not claimed
    /// unless the reader is the last, which refuses it with its reason).
    func claims(_ bytes: [UInt8]) -> Bool
    /// Reads a record this reader claims: a believed notification, or why it is refused (`not_configured` when the
    /// store's settings are missing).
    func read(_ bytes: [UInt8], receivedAt: Date) async -> Result<ReadNotification, NotificationRefusal>
}

/// The store-notifications topic's reader: each record goes to the first store's reader that claims it — Apple's V2
/// bodies (a JSON object naming `signedPayload`, verified, then read), then Google's RTDN messages (any other record).
/// A store the worker is not configured for is refused (`not_configured`), as is anything a reader refuses, with its
/// code. A third store that pushes notifications adds its ``StoreBodyReader`` to ``readers``.
public struct StoreNotificationReader: StoreNotificationReading {
    /// Apple's settings: the verifier (its roots), the app and the environment believed.
    public struct Apple: Sendable {
        public var verifier: AppleJWSVerifier
        public var bundleId: String
        public var environment: AppleNotification.Environment

        public init(verifier: AppleJWSVerifier, bundleId: String, environment: AppleNotification.Environment) {
            self.verifier = verifier
            self.bundleId = bundleId
            self.environment = environment
        }
    }

    /// `refunds.google.package_name`; `nil`: Google notifications are refused.
    public var googlePackageName: String?
    /// `refunds.apple.*`; `nil`: Apple notifications are refused.
    public var apple: Apple?

    public init(googlePackageName: String?, apple: Apple?) {
        self.googlePackageName = googlePackageName
        self.apple = apple
    }

    /// The stores' readers, in the order they are asked: the last claims whatever the others did not.
    public var readers: [any StoreBodyReader] {
        [AppleBodyReader(settings: apple), GoogleBodyReader(packageName: googlePackageName)]
    }

    public func read(_ bytes: [UInt8], receivedAt: Date) async -> Result<ReadNotification, NotificationRefusal> {
        let readers = readers
        // Larger than any store's notification: whose it claims to be is not worth reading.
        guard bytes.count <= readers.map(\.maxBytes).max() ?? 0 else {
            return .failure(NotificationRefusal(store: nil, code: "malformed", detail: "the record is over 65 KiB"))
        }
        for reader in readers where reader.claims(bytes) {
            return await reader.read(bytes, receivedAt: receivedAt)
        }
        return .failure(NotificationRefusal(store: nil, code: "malformed", detail: "no store's notification"))
    }

    static func refusal(_ error: StoreNotificationError) -> NotificationRefusal {
        NotificationRefusal(
            store: error.store, code: error.code.rawValue, detail: error.detail, claimedId: error.claimedId)
    }
}

/// Apple's App Store Server Notifications V2 bodies on the topic, and the signed payloads of its history.
public struct AppleBodyReader: StoreBodyReader {
    public let settings: StoreNotificationReader.Apple?
    public var store: Store { .apple }
    public var maxBytes: Int { AppleJWSVerifier.Limits.jws + 1_024 }

    public init(settings: StoreNotificationReader.Apple?) {
        self.settings = settings
    }

    /// Whether the record is a JSON object with a top-level `signedPayload` member.
    public func claims(_ bytes: [UInt8]) -> Bool {
        guard bytes.count <= maxBytes else { return false }
        var found = false
        var reader = JSONReader(bytes, maxDepth: AppleJWSVerifier.Limits.nesting)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                if key == "signedPayload" { found = true }
                try reader.skipValue()
            }
        } catch {
            return false
        }
        return found
    }

    public func read(_ bytes: [UInt8], receivedAt: Date) async -> Result<ReadNotification, NotificationRefusal> {
        let signed: String
        do {
            signed = try AppleNotification.signedPayload(ofBody: bytes)
        } catch {
            return .failure(StoreNotificationReader.refusal(error))
        }
        return await readSignedPayload(signed, receivedAt: receivedAt, channel: .appleNotification)
    }

    /// Verifies and reads one `signedPayload` (a V2 body's, or one of the notification history's).
    public func readSignedPayload(_ signedPayload: String, receivedAt: Date, channel: NotificationChannel) async
        -> Result<ReadNotification, NotificationRefusal>
    {
        guard let settings else {
            return .failure(
                NotificationRefusal(
                    store: .apple, code: "not_configured", detail: "refunds.apple is not set",
                    claimedId: AppleNotification.claimedUUID(of: signedPayload)))
        }
        do {
            let notification = try await AppleNotification.read(
                signedPayload: signedPayload, verifier: settings.verifier, bundleId: settings.bundleId,
                environment: settings.environment, receivedAt: receivedAt)
            return .success(ReadNotification(notification: notification, channel: channel))
        } catch {
            var refusal = StoreNotificationReader.refusal(error)
            refusal.claimedId = AppleNotification.claimedUUID(of: signedPayload)
            return .failure(refusal)
        }
    }
}

/// Google's Real-time developer notifications: the notification JSON, or the Pub/Sub envelope around it.
public struct GoogleBodyReader: StoreBodyReader {
    /// `refunds.google.package_name`.
    public let packageName: String?
    public var store: Store { .google }
    public var maxBytes: Int { GoogleNotification.Limits.bytes }

    public init(packageName: String?) {
        self.packageName = packageName
    }

    /// Any record: Google's reader is asked last, and what it cannot parse is refused with its reason.
    public func claims(_ bytes: [UInt8]) -> Bool { true }

    public func read(_ bytes: [UInt8], receivedAt: Date) async -> Result<ReadNotification, NotificationRefusal> {
        guard let packageName else {
            return .failure(
                NotificationRefusal(
                    store: .google, code: "not_configured",
                    detail: "not an Apple notification, and refunds.google.package_name is not set"))
        }
        switch GoogleNotification.parse(bytes, packageName: packageName) {
        case .success(let notification):
            return .success(ReadNotification(notification: notification, channel: .googleRTDN))
        case .failure(let error):
            return .failure(StoreNotificationReader.refusal(error))
        }
    }
}

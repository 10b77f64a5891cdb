import Foundation
import Fulfilment
import Wire

/// The store-notifications topic's reader: a record whose JSON object names `signedPayload` is an Apple V2 body
/// (verified, then read); any other is a Google RTDN message. A store the worker is not configured for is refused
/// (`not_configured`), as is anything one of the readers refuses, with its code.
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

    public func read(_ bytes: [UInt8], receivedAt: Date) async -> Result<ReadNotification, NotificationRefusal> {
        // Larger than either store's notification: whose it claims to be is not worth reading.
        guard bytes.count <= max(AppleJWSVerifier.Limits.jws + 1_024, GoogleNotification.Limits.bytes) else {
            return .failure(NotificationRefusal(store: nil, code: "malformed", detail: "the record is over 65 KiB"))
        }
        if Self.isAppleBody(bytes) {
            let signed: String
            do {
                signed = try AppleNotification.signedPayload(ofBody: bytes)
            } catch {
                return .failure(Self.refusal(error))
            }
            return await readAppleSignedPayload(signed, receivedAt: receivedAt).map {
                ReadNotification(notification: $0, channel: .appleNotification)
            }
        }
        guard let packageName = googlePackageName else {
            return .failure(
                NotificationRefusal(
                    store: .google, code: "not_configured",
                    detail: "not an Apple notification, and refunds.google.package_name is not set"))
        }
        switch GoogleNotification.parse(bytes, packageName: packageName) {
        case .success(let notification):
            return .success(ReadNotification(notification: notification, channel: .googleRTDN))
        case .failure(let error):
            return .failure(Self.refusal(error))
        }
    }

    public func readAppleSignedPayload(_ signedPayload: String, receivedAt: Date) async
        -> Result<StoreNotification, NotificationRefusal>
    {
        guard let apple else {
            return .failure(
                NotificationRefusal(store: .apple, code: "not_configured", detail: "refunds.apple is not set"))
        }
        do {
            return .success(
                try await AppleNotification.read(
                    signedPayload: signedPayload, verifier: apple.verifier, bundleId: apple.bundleId,
                    environment: apple.environment, receivedAt: receivedAt))
        } catch {
            return .failure(Self.refusal(error))
        }
    }

    static func refusal(_ error: StoreNotificationError) -> NotificationRefusal {
        NotificationRefusal(store: error.store, code: error.code.rawValue, detail: error.detail)
    }

    /// Whether the record is a JSON object with a top-level `signedPayload` member (read without keeping any value).
    static func isAppleBody(_ bytes: [UInt8]) -> Bool {
        guard bytes.count <= AppleJWSVerifier.Limits.jws + 1_024 else { return false }
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
}

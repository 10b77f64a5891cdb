import Foundation
import Fulfilment
import Stores

@testable import Wire

/// The store-notifications topic's reader on any bytes (docs/fuzzing.md, "The store notification target"): anyone who
/// can write to the topic can send anything, and Apple's history answers are bytes from the network too.
public enum StoreNotifications {
    static let packageName = "com.example.game"
    /// Apple's built-in root alone: no byte string a fuzzer makes carries Apple's signature. Made for each input: a
    /// reader kept in a global holds keys LeakSanitizer cannot see referenced.
    static func reader() -> StoreNotificationReader {
        do {
            return StoreNotificationReader(
                googlePackageName: packageName,
                apple: .init(verifier: try AppleJWSVerifier(), bundleId: "com.example.game", environment: .production))
        } catch {
            fuzzFailure("the built-in Apple root does not load: \(error)")
        }
    }
    static let receivedAt = Date(timeIntervalSince1970: 1_764_000_000)

    /// The first byte chooses how the rest becomes a record: 0 as it is; 1 as the `signedPayload` of an Apple body;
    /// 2 as a JWS of three fields (header, payload, signature; each base64url-encoded here, so the fuzzer reaches the
    /// header's `x5c` certificates and the payload); 3 as Google's notification, read bare and inside a Pub/Sub
    /// message.
    public static func check(_ input: [UInt8]) {
        var bytes = FuzzBytes(input)
        let mode = bytes.byte() % 5
        if mode == 4 {
            checkVoidedPurchase(bytes.rest())
            return
        }
        let records: [[UInt8]]
        switch mode {
        case 0: records = [bytes.rest()]
        case 1: records = [body(signedPayload: String(decoding: bytes.rest(), as: UTF8.self))]
        case 2:
            let jws = [bytes.field(), bytes.field(), bytes.field()].map { Base64URL.encode($0) }.joined(separator: ".")
            records = [body(signedPayload: jws)]
        default: records = [bytes.rest()]
        }
        runBlocking {
            if mode < 3 {
                await read(records[0])
            } else {
                await checkEnvelope(records[0])
            }
        }
    }

    /// Google's notification read bare and inside a Pub/Sub push envelope.
    static func checkEnvelope(_ notification: [UInt8]) async {
        let bare = await read(notification)
        let wrapped =
            #"{"message":{"data":"\#(Data(notification).base64EncodedString())","messageId":"m-1"},"#
            + #""subscription":"projects/p/subscriptions/s"}"#
        let inside = await read(Array(wrapped.utf8))
        // The same notification, bare or in its push envelope, is one notification (recorded once): believed in
        // both, under one id. (An envelope may be refused for its size alone; one inside another is no notification.)
        if case .success(let plain) = bare, wrapped.utf8.count <= 65_536,
            let keys = topLevelKeys(notification), keys.isDisjoint(with: ["message", "data", "messageId"])
        {
            guard case .success(let enveloped) = inside else {
                fuzzFailure("a notification believed bare is refused in its envelope: \(inside)")
            }
            fuzzCheck(
                plain.notification.notificationId == enveloped.notification.notificationId,
                "one notification, two ids: \(plain.notification.notificationId), "
                    + "\(enveloped.notification.notificationId)")
            fuzzCheck(enveloped.notification.deliveryId == "m-1", "the envelope's messageId is not kept")
        }
    }

    /// An entry of Google Play's Voided Purchases API (network bytes too): read twice the same; a believed one is a
    /// refund of an order id of at most 256 bytes, its token kept only as a SHA-256 hex, a quantity only when it is a
    /// partial refund and at most a million.
    static func checkVoidedPurchase(_ entry: [UInt8]) {
        let first = GoogleNotification.voidedPurchase(entry, packageName: packageName)
        let again = GoogleNotification.voidedPurchase(entry, packageName: packageName)
        switch (first, again) {
        case (.success(let read), .success(let twice)):
            fuzzCheck(read == twice, "one entry read two ways")
            fuzzCheck(read.kind == .refund && read.store == .google, "a voided purchase that is no Google refund")
            fuzzCheck((read.paymentId?.utf8.count ?? 0) <= 256, "an order id over 256 bytes")
            fuzzCheck(read.purchaseTokenHash?.utf8.count == 64, "the token kept other than as its hash")
            fuzzCheck(
                read.quantity.map { (1...1_000_000).contains($0) && read.isPartialRefund } ?? true,
                "a quantity out of bounds or on a whole refund")
        case (.failure(let refused), .failure(let twice)):
            fuzzCheck(refused == twice, "one entry refused two ways")
            fuzzCheck(refused.detail.utf8.count <= 1_024, "a refusal's detail over 1 KiB")
        default:
            fuzzFailure("one entry believed once and refused once")
        }
    }

    /// The top-level member names of a JSON object; `nil` for anything else.
    static func topLevelKeys(_ bytes: [UInt8]) -> Set<String>? {
        var keys: Set<String> = []
        var reader = JSONReader(bytes, maxDepth: 64)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                keys.insert(key)
                try reader.skipValue()
            }
        } catch {
            return nil
        }
        return keys
    }

    static func body(signedPayload: String) -> [UInt8] {
        var text = ""
        JSONText.appendObject(to: &text) { $0.string("signedPayload", signedPayload) }
        return Array(text.utf8)
    }

    /// Reads `record` twice and checks what was read: the same both times; never believed as Apple's; a Google
    /// notification's identity and what it keeps within bounds, its token only hashed; a refusal a short line.
    @discardableResult
    static func read(_ record: [UInt8]) async -> Result<ReadNotification, NotificationRefusal> {
        let reader = reader()
        let results = [
            await reader.read(record, receivedAt: receivedAt), await reader.read(record, receivedAt: receivedAt),
        ]
        fuzzCheck(results[0] == results[1], "the same record read twice differently: \(results[0]), \(results[1])")
        switch results[0] {
        case .success(let read):
            let n = read.notification
            fuzzCheck(n.store == .google, "believed as Apple's without Apple's signature: \(n)")
            fuzzCheck(
                !n.notificationId.isEmpty && n.notificationId.utf8.count <= 128, "notification id \(n.notificationId)")
            if let hash = n.purchaseTokenHash {
                fuzzCheck(
                    hash.utf8.count == 64
                        && hash.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) },
                    "a token hash that is no SHA-256 hex: \(hash)")
            }
            for (name, value) in [
                ("paymentId", n.paymentId), ("deliveryId", n.deliveryId), ("application", n.application),
                ("productId", n.productId), ("reason", n.reason), ("storeType", n.storeType),
            ] {
                fuzzCheck((value?.utf8.count ?? 0) <= 8_192, "\(name) of \(value?.utf8.count ?? 0) bytes kept")
            }
            fuzzCheck(n.application == packageName || n.application == nil, "another package believed: \(n)")
        case .failure(let refusal):
            fuzzCheck(!refusal.code.isEmpty, "a refusal without a code")
            fuzzCheck(refusal.detail.utf8.count <= 1_024, "a refusal of \(refusal.detail.utf8.count) bytes: \(refusal)")
        }
        return results[0]
    }
}

import Crypto
import Foundation
import Synchronization
import Wire

/// The bearer token of App Store Server API calls: a JWT signed with ES256 by the studio's key (header `alg`, `kid`,
/// `typ`; claims `iss`, `iat`, `exp`, `aud` `appstoreconnect-v1`, `bid`). One token serves every call until shortly
/// before it expires.
final class AppStoreToken: Sendable {
    /// How long a token is valid (Apple accepts at most 60 minutes).
    static let lifetime: TimeInterval = 20 * 60
    /// A token this close to its expiry is replaced.
    static let renewal: TimeInterval = 60

    let key: AppStoreKey
    private let cached = Mutex<(token: String, expires: Date)?>(nil)

    init(key: AppStoreKey) {
        self.key = key
    }

    /// A token valid at `now` for at least ``renewal``.
    func token(now: Date = Date()) throws -> String {
        if let cached = cached.withLock({ $0 }), cached.expires.timeIntervalSince(now) > Self.renewal {
            return cached.token
        }
        let token = try Self.sign(key: key, issuedAt: now, lifetime: Self.lifetime)
        cached.withLock { $0 = (token, now.addingTimeInterval(Self.lifetime)) }
        return token
    }

    static func sign(key: AppStoreKey, issuedAt: Date, lifetime: TimeInterval) throws -> String {
        var header = ""
        JSONText.appendObject(to: &header) { object in
            object.string("alg", "ES256")
            object.string("kid", key.keyId)
            object.string("typ", "JWT")
        }
        let issued = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        var claims = ""
        JSONText.appendObject(to: &claims) { object in
            object.string("iss", key.issuerId)
            object.integer("iat", issued)
            object.integer("exp", issued + Int64(lifetime))
            object.string("aud", "appstoreconnect-v1")
            object.string("bid", key.bundleId)
        }
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try key.privateKey.signature(for: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }
}

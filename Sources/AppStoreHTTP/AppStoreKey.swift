import Crypto
import Foundation
import Fulfilment

/// The studio's In-App Purchase key (App Store Connect, Users and Access, Integrations): the ES256 key that signs
/// every App Store Server API call, its key id and issuer id, and the app it speaks for. `description` never shows the
/// key.
public struct AppStoreKey: Sendable, CustomStringConvertible {
    public var issuerId: String
    public var keyId: String
    public var bundleId: String
    let privateKey: P256.Signing.PrivateKey

    /// - Parameter pem: the `.p8` file's text (a PKCS #8 `PRIVATE KEY`).
    /// - Throws: ``AppStoreError`` (`configuration`) when it is not a P-256 private key; the text is never quoted.
    public init(issuerId: String, keyId: String, bundleId: String, pem: String) throws(AppStoreError) {
        do {
            privateKey = try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw AppStoreError(.configuration, "the private key file does not hold a P-256 private key (.p8)")
        }
        self.issuerId = issuerId
        self.keyId = keyId
        self.bundleId = bundleId
    }

    /// A key made in code (tests and the simulator's demo).
    public init(issuerId: String, keyId: String, bundleId: String, privateKey: P256.Signing.PrivateKey) {
        self.issuerId = issuerId
        self.keyId = keyId
        self.bundleId = bundleId
        self.privateKey = privateKey
    }

    public var description: String { "AppStoreKey(issuer \(issuerId), key \(keyId), bundle \(bundleId))" }
}

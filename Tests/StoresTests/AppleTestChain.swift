import Crypto
import Foundation
import SwiftASN1
import X509

@testable import Stores

/// A certificate chain shaped as Apple's (root, intermediate with Apple's developer-relations marker, leaf with the
/// App Store signing marker), made for the tests, and a signer of JWS with it.
struct AppleTestChain {
    let rootKey = P256.Signing.PrivateKey()
    let intermediateKey = P256.Signing.PrivateKey()
    let leafKey = P256.Signing.PrivateKey()
    let root: Certificate
    let intermediate: Certificate
    let leaf: Certificate

    /// - Parameters:
    ///   - validFrom, validUntil: the leaf's validity.
    ///   - leafMarked, intermediateMarked: whether each carries Apple's marker.
    init(
        validFrom: Date = Date(timeIntervalSinceNow: -86_400 * 730),
        validUntil: Date = Date(timeIntervalSinceNow: 86_400 * 365), leafMarked: Bool = true,
        intermediateMarked: Bool = true, name: String = "Test"
    ) throws {
        let rootName = try DistinguishedName { CommonName("\(name) Root CA") }
        let intermediateName = try DistinguishedName { CommonName("\(name) Developer Relations CA") }
        let leafName = try DistinguishedName { CommonName("\(name) App Store Signing") }
        let longAgo = Date(timeIntervalSinceNow: -86_400 * 3_650)
        let farAhead = Date(timeIntervalSinceNow: 86_400 * 3_650)
        root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey), notValidBefore: longAgo,
            notValidAfter: farAhead, issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                KeyUsage(keyCertSign: true)
            },
            issuerPrivateKey: .init(rootKey))
        let intermediateMarker = Certificate.Extension(
            oid: AppleJWSVerifier.intermediateMarker, critical: false, value: [0x05, 0x00])
        intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(intermediateKey.publicKey),
            notValidBefore: longAgo, notValidAfter: farAhead, issuer: rootName, subject: intermediateName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                KeyUsage(keyCertSign: true)
                if intermediateMarked { intermediateMarker }
            },
            issuerPrivateKey: .init(rootKey))
        let leafMarker = Certificate.Extension(
            oid: AppleJWSVerifier.appStoreSigningMarker, critical: false, value: [0x05, 0x00])
        leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey), notValidBefore: validFrom,
            notValidAfter: validUntil, issuer: intermediateName, subject: leafName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                KeyUsage(digitalSignature: true)
                if leafMarked { leafMarker }
            },
            issuerPrivateKey: .init(intermediateKey))
    }

    /// A compact JWS of `payload` signed with the leaf's key, its header naming the chain (leaf, intermediate, root).
    func sign(_ payload: String, algorithm: String = "ES256", key: P256.Signing.PrivateKey? = nil) throws -> String {
        func base64(_ certificate: Certificate) throws -> String {
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return Data(serializer.serializedBytes).base64EncodedString()
        }
        let header =
            #"{"alg":"\#(algorithm)","x5c":["\#(try base64(leaf))","\#(try base64(intermediate))","\#(try base64(root))"]}"#
        let signed = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
        let signature = try (key ?? leafKey).signature(for: Array(signed.utf8))
        return signed + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }

    /// A verifier that trusts this chain's root only.
    var verifier: AppleJWSVerifier { AppleJWSVerifier(roots: [root]) }
}

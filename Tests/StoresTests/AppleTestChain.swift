import Crypto
import Foundation
import SwiftASN1
import X509

@testable import Stores

/// A certificate chain shaped as Apple's (root, intermediate with Apple's developer-relations marker, leaf with the
/// App Store signing marker), made for the tests, and a signer of JWS with it.
struct AppleTestChain {
    /// The time the tests' payloads say they were signed (2025-11-24T16:00:00Z); every validity is built around it, so
    /// the tests mean the same whenever they run.
    static let signedAt = Date(timeIntervalSince1970: 1_764_000_000)
    /// When the tests receive what was signed: a day later.
    static let receivedAt = signedAt.addingTimeInterval(86_400)

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
        validFrom: Date = signedAt.addingTimeInterval(-86_400 * 730),
        validUntil: Date = signedAt.addingTimeInterval(86_400 * 730), leafMarked: Bool = true,
        intermediateMarked: Bool = true, name: String = "Test"
    ) throws {
        let rootName = try DistinguishedName { CommonName("\(name) Root CA") }
        let intermediateName = try DistinguishedName { CommonName("\(name) Developer Relations CA") }
        let leafName = try DistinguishedName { CommonName("\(name) App Store Signing") }
        let longAgo = Self.signedAt.addingTimeInterval(-86_400 * 3_650)
        let farAhead = Self.signedAt.addingTimeInterval(86_400 * 3_650)
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

    /// A compact JWS of `payload` signed with `key` (the leaf's), its header naming `algorithm` and `chain` (the leaf,
    /// the intermediate and the root), or being `header` as given.
    func sign(
        _ payload: String, algorithm: String = "ES256", key: P256.Signing.PrivateKey? = nil,
        chain: [Certificate]? = nil, header: String? = nil
    ) throws -> String {
        let certificates = try (chain ?? [leaf, intermediate, root]).map { certificate in
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return "\"" + Data(serializer.serializedBytes).base64EncodedString() + "\""
        }
        let header = header ?? #"{"alg":"\#(algorithm)","x5c":[\#(certificates.joined(separator: ","))]}"#
        let signed = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
        let signature = try (key ?? leafKey).signature(for: Array(signed.utf8))
        return signed + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }

    /// A verifier that trusts this chain's root only.
    var verifier: AppleJWSVerifier { AppleJWSVerifier(roots: [root]) }
}

import Crypto
import Foundation
import Stores
import SwiftASN1
import Wire
import X509

/// A certificate chain shaped as Apple's — a root, an intermediate with Apple's developer-relations marker, a leaf
/// with the App Store signing marker — made here, and a signer of JWS with it: what the App Store simulator signs its
/// notifications with, and what the tests build hostile chains from. The worker trusts its root only by explicit
/// configuration (`refunds.apple.root_certificates_file`, ``rootPEM``).
public struct AppleSigningChain: Sendable {
    public let rootKey = P256.Signing.PrivateKey()
    public let intermediateKey = P256.Signing.PrivateKey()
    public let leafKey = P256.Signing.PrivateKey()
    public let root: Certificate
    public let intermediate: Certificate
    public let leaf: Certificate

    /// - Parameters:
    ///   - around: the time the chain's validity is built around (the root and intermediate ten years either side).
    ///   - validFrom, validUntil: the leaf's validity (two years either side of `around` unless given).
    ///   - leafMarked, intermediateMarked: whether each carries Apple's marker.
    public init(
        around: Date, validFrom: Date? = nil, validUntil: Date? = nil, leafMarked: Bool = true,
        intermediateMarked: Bool = true, name: String = "Test"
    ) throws {
        let rootName = try DistinguishedName { CommonName("\(name) Root CA") }
        let intermediateName = try DistinguishedName { CommonName("\(name) Developer Relations CA") }
        let leafName = try DistinguishedName { CommonName("\(name) App Store Signing") }
        let longAgo = around.addingTimeInterval(-86_400 * 3_650)
        let farAhead = around.addingTimeInterval(86_400 * 3_650)
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
            version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey),
            notValidBefore: validFrom ?? around.addingTimeInterval(-86_400 * 730),
            notValidAfter: validUntil ?? around.addingTimeInterval(86_400 * 730), issuer: intermediateName,
            subject: leafName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                KeyUsage(digitalSignature: true)
                if leafMarked { leafMarker }
            },
            issuerPrivateKey: .init(intermediateKey))
    }

    /// A compact JWS of `payload` signed with `key` (the leaf's), its header naming `algorithm` and `chain` (the leaf,
    /// the intermediate and the root), or being `header` as given.
    public func sign(
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
    public var verifier: AppleJWSVerifier { AppleJWSVerifier(roots: [root]) }

    /// The root as PEM text: the content of a `refunds.apple.root_certificates_file`.
    public var rootPEM: String {
        get throws { try root.serializeAsPEM().pemString }
    }
}

import Crypto
import Foundation
import Fulfilment
import SwiftASN1
import Wire
// The SPI is swift-certificates' way to check expiry at a fixed time (the signing time) rather than now.
@_spi(FixedExpiryValidationTime) import X509

/// Verifies the JWS Apple signs App Store data with (a notification's `signedPayload`, a `signedTransactionInfo`):
/// ES256 over the header and payload by the key of the first certificate in the header's `x5c`, and that certificate
/// chained, through the ones after it, to a root this verifier trusts (Apple Root CA – G3 unless told otherwise). The
/// leaf must carry Apple's marker for App Store signing and the intermediate Apple's marker for its Worldwide Developer
/// Relations CA, so no other certificate Apple issued under the same root can sign App Store data.
///
/// The chain is checked at the time the payload says it was signed (`signedDate`), as Apple's own library does when
/// it does not ask OCSP: a notification read from the history months later is still evidence. Since the signer chooses
/// that time, it must also lie within the history's reach of the time the JWS was received (``Limits/maxAge``, and no
/// more than ``Limits/futureSkew`` ahead): a leaf key that leaked after its certificate expired cannot sign evidence
/// backdated into its validity for ever. Nothing of the payload is believed before the signature verifies.
public struct AppleJWSVerifier: Sendable {
    /// Limits, in bytes.
    public enum Limits {
        /// The compact JWS (Apple's are a few kilobytes; a notification holds its transaction's JWS).
        public static let jws = 65_536
        /// Certificates in `x5c`.
        public static let chain = 4
        /// Deeper JSON is refused.
        public static let nesting = 16
        /// The oldest `signedDate` believed, before the time of receipt: the notification history's 180 days and a
        /// margin.
        public static let maxAge: TimeInterval = 185 * 86_400
        /// How far ahead of the time of receipt a `signedDate` may be by default (clocks differ):
        /// `refunds.max_clock_skew_ms`.
        public static let futureSkew: TimeInterval = 300
    }

    /// Apple's marker on a leaf certificate that signs App Store data.
    package static let appStoreSigningMarker: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 11, 1]
    /// Apple's marker on its Worldwide Developer Relations intermediate CA.
    package static let intermediateMarker: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 2, 1]

    private let roots: [Certificate]
    /// How far ahead of the time of receipt a `signedDate` may be (``Limits/futureSkew`` unless configured).
    public var futureSkew: TimeInterval = Limits.futureSkew

    /// Trusts `roots` only: Apple Root CA – G3 in production; a test root by explicit configuration only
    /// (`refunds.apple.root_certificates_file`).
    public init(roots: [Certificate]) {
        self.roots = roots
    }

    /// Trusts the certificates of a PEM text only (``AppleRootCertificates/certificates(pem:)``).
    public init(rootCertificatesPEM pem: String) throws(StoreNotificationError) {
        self.init(roots: try AppleRootCertificates.certificates(pem: pem))
    }

    /// Trusts Apple Root CA – G3.
    public init() throws {
        self.init(roots: [try AppleRootCertificates.rootCAG3()])
    }

    /// The payload of a verified JWS; every failure is `.unverified` or `.malformed`, saying why (never echoing the
    /// JWS).
    ///
    /// - Parameter receivedAt: when the JWS was received (read from the topic, or answered by the history).
    public func payload(of jws: String, receivedAt: Date) async throws(StoreNotificationError) -> [UInt8] {
        guard jws.utf8.count <= Limits.jws else { throw Self.malformed("the JWS is over \(Limits.jws) bytes") }
        let parts = jws.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw Self.malformed("the JWS does not have three parts") }
        guard let headerBytes = Base64URL.decode(parts[0]), let payload = Base64URL.decode(parts[1]),
            let signatureBytes = Base64URL.decode(parts[2])
        else { throw Self.malformed("a part of the JWS is not base64url") }
        let header = try Self.header(headerBytes)
        guard header.algorithm == "ES256" else {
            throw Self.unverified("the JWS is signed with \(StoreText.printable(header.algorithm)), not ES256")
        }
        let certificates = try header.chain.map { der throws(StoreNotificationError) in
            do { return try Certificate(derEncoded: der) } catch {
                throw Self.malformed("a certificate of x5c cannot be read")
            }
        }
        guard let leaf = certificates.first, certificates.count >= 2 else {
            throw Self.unverified("x5c holds \(certificates.count) certificate(s); a leaf and its intermediate needed")
        }
        guard let key = P256.Signing.PublicKey(leaf.publicKey),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
        else { throw Self.unverified("the signing certificate's key or the signature is not ECDSA P-256") }
        // The signed bytes: the header and payload exactly as they came, base64url and all.
        let signed = Array(parts[0]) + [UInt8(ascii: ".")] + Array(parts[1])
        guard key.isValidSignature(signature, for: signed) else {
            throw Self.unverified("the signature does not verify")
        }

        let signedAt = try Self.signedDate(payload)
        guard signedAt >= receivedAt.addingTimeInterval(-Limits.maxAge),
            signedAt <= receivedAt.addingTimeInterval(futureSkew)
        else {
            throw Self.unverified(
                "signed at \(signedAt), more than \(Int(Limits.maxAge / 86_400)) days before it was received or more than "
                    + "\(Int(futureSkew)) s ahead of this host's clock (refunds.max_clock_skew_ms)")
        }
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
            RFC5280Policy(fixedExpiryValidationTime: signedAt)
            AppleMarkersPolicy()
        }
        let result = await verifier.validate(leaf: leaf, intermediates: CertificateStore(certificates.dropFirst()))
        guard case .validCertificate = result else {
            throw Self.unverified("the certificate chain does not lead to a trusted root at the signing time")
        }
        return payload
    }

    /// What the header says: the algorithm and the `x5c` certificates (DER).
    private static func header(_ bytes: [UInt8]) throws(StoreNotificationError) -> (algorithm: String, chain: [[UInt8]])
    {
        var algorithm: String?
        var chain: [[UInt8]]?
        var seen: Set<String> = []
        var duplicate = false
        var reader = JSONReader(bytes, maxDepth: Limits.nesting)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                if !seen.insert(key).inserted { duplicate = true }
                switch key {
                case "alg": algorithm = try reader.readStringOrSkip() ?? "a non-string"
                case "x5c":
                    var certificates: [[UInt8]] = []
                    try reader.readArray { reader throws(JSONReader.Failure) in
                        // Standard base64 with padding (RFC 7515 §4.1.6), not base64url.
                        let text = try reader.readString()
                        certificates.append(Data(base64Encoded: text).map { [UInt8]($0) } ?? [])
                    }
                    chain = certificates
                default: try reader.skipValue()
                }
            }
            try reader.finish()
        } catch {
            throw malformed("the JWS header is not a JSON object with a string alg and an x5c array of strings")
        }
        // Parsers disagree on which of two values counts.
        guard !duplicate else { throw malformed("the JWS header names a member twice") }
        guard let algorithm else { throw malformed("the JWS header has no alg") }
        guard let chain, !chain.isEmpty else { throw unverified("the JWS header has no x5c certificate chain") }
        guard chain.count <= Limits.chain else { throw malformed("x5c holds more than \(Limits.chain) certificates") }
        guard chain.allSatisfy({ !$0.isEmpty }) else { throw malformed("a certificate of x5c is not base64") }
        return (algorithm, chain)
    }

    /// The payload's `signedDate` (milliseconds since 1970): the time the chain must have been valid at.
    private static func signedDate(_ payload: [UInt8]) throws(StoreNotificationError) -> Date {
        var millis: Int64?
        var reader = JSONReader(payload, maxDepth: Limits.nesting)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                if key == "signedDate" { millis = try reader.readInt64() } else { try reader.skipValue() }
            }
            try reader.finish()
        } catch {
            throw malformed("the JWS payload is not a JSON object with a whole-number signedDate")
        }
        guard let millis, let date = StoreText.date(millis: millis) else {
            throw malformed("the JWS payload has no signedDate")
        }
        return date
    }

    static func malformed(_ detail: String) -> StoreNotificationError {
        StoreNotificationError(.malformed, store: .apple, detail)
    }

    static func unverified(_ detail: String) -> StoreNotificationError {
        StoreNotificationError(.unverified, store: .apple, detail)
    }
}

/// The chain's leaf carries Apple's App Store signing marker and the certificate above it Apple's intermediate marker.
struct AppleMarkersPolicy: VerifierPolicy {
    var verifyingCriticalExtensions: [ASN1ObjectIdentifier] { [] }

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        // Apple's chains are exactly that: a leaf, Apple's intermediate, Apple's root.
        guard chain.count == 3 else { return .failsToMeetPolicy(reason: "a leaf, an intermediate and a root needed") }
        guard chain[0].extensions[oid: AppleJWSVerifier.appStoreSigningMarker] != nil else {
            return .failsToMeetPolicy(reason: "the leaf is not marked for App Store signing")
        }
        guard chain[1].extensions[oid: AppleJWSVerifier.intermediateMarker] != nil else {
            return .failsToMeetPolicy(reason: "the intermediate is not Apple's developer relations CA")
        }
        return .meetsPolicy
    }
}

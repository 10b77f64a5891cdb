import Foundation
import Fulfilment
import Wire
import _CryptoExtras

/// A Google Cloud service account's JSON key (`refunds.google.service_account_file`): who the worker is to Google
/// (`client_email`), the RSA key that signs its token requests (`private_key`, `private_key_id`) and where it asks for
/// tokens (`token_uri`). `description` never shows the key.
public struct GoogleServiceAccount: Sendable, CustomStringConvertible {
    /// Google's token endpoint, when the key names none.
    public static let defaultTokenURI = "https://oauth2.googleapis.com/token"

    public var clientEmail: String
    public var privateKeyId: String?
    public var tokenURI: String
    let privateKey: _RSA.Signing.PrivateKey

    /// Why a key file cannot be used; never quotes the key.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// Reads a key file's JSON (at most 64 KiB).
    public init(json bytes: [UInt8]) throws(Failure) {
        guard bytes.count <= 65_536 else { throw Failure("the service account key file is over 64 KiB") }
        var fields: [String: String] = [:]
        var reader = JSONReader(bytes, maxDepth: 4)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                if let text = try reader.readStringOrSkip() { fields[key] = text }
            }
            try reader.finish()
        } catch {
            throw Failure("the service account key file is not a JSON object (\(error.problem))")
        }
        guard fields["type"] == "service_account" else {
            throw Failure("the key file's type is not service_account: create a key for a service account")
        }
        guard let email = fields["client_email"], !email.isEmpty, email.utf8.count <= 320 else {
            throw Failure("the key file has no client_email")
        }
        guard let pem = fields["private_key"] else { throw Failure("the key file has no private_key") }
        do {
            privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw Failure("the key file's private_key is not an RSA private key of 2048 bits or more")
        }
        let tokenURI = fields["token_uri"] ?? Self.defaultTokenURI
        guard let url = URL(string: tokenURI), let host = url.host, url.scheme == "https" || url.scheme == "http" else {
            throw Failure("the key file's token_uri is not an http(s) URL")
        }
        // The signed assertion buys an access token: over plain HTTP only to this machine (a simulator).
        guard url.scheme == "https" || OutsideText.isLoopbackHost(host) else {
            throw Failure("the key file's token_uri must be https:// (http only to loopback)")
        }
        clientEmail = email
        privateKeyId = fields["private_key_id"].flatMap { $0.isEmpty ? nil : $0 }
        self.tokenURI = tokenURI
    }

    /// A key made in code (the simulator's, and tests').
    public init(clientEmail: String, privateKeyId: String?, tokenURI: String, privateKey: _RSA.Signing.PrivateKey) {
        self.clientEmail = clientEmail
        self.privateKeyId = privateKeyId
        self.tokenURI = tokenURI
        self.privateKey = privateKey
    }

    public var description: String { "GoogleServiceAccount(\(clientEmail), key \(privateKeyId ?? "-"))" }

    /// The scope the Voided Purchases API needs.
    public static let androidPublisherScope = "https://www.googleapis.com/auth/androidpublisher"

    /// The signed JWT of the OAuth 2.0 JWT-bearer grant (RFC 7523): RS256, `iss` the account, `scope`, `aud` the token
    /// endpoint, valid an hour from `issuedAt`.
    public func assertion(issuedAt: Date, lifetime: TimeInterval = 3_600) throws -> String {
        var header = ""
        JSONText.appendObject(to: &header) { object in
            object.string("alg", "RS256")
            object.string("typ", "JWT")
            if let privateKeyId { object.string("kid", privateKeyId) }
        }
        let issued = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        var claims = ""
        JSONText.appendObject(to: &claims) { object in
            object.string("iss", clientEmail)
            object.string("scope", Self.androidPublisherScope)
            object.string("aud", tokenURI)
            object.integer("iat", issued)
            object.integer("exp", issued + Int64(lifetime))
        }
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try privateKey.signature(for: Array(signingInput.utf8), padding: .insecurePKCS1v1_5)
        return signingInput + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }
}

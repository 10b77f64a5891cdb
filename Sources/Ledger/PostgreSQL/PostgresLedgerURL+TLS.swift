import Foundation
import Fulfilment
import NIOSSL
import PostgresNIO

extension PostgresLedgerURL {
    /// The TLS settings `sslMode` asks for: `nil` for `disable`; no verification for `require`; for `verify-full`,
    /// the chain against `sslRootCert` (or the system's roots) and the host name (an IP address against the
    /// certificate's IP addresses).
    ///
    /// - Throws: ``LedgerError`` with code `configuration` when `sslrootcert` cannot be read or holds no PEM
    ///   certificate.
    func tlsConfiguration() throws(LedgerError) -> TLSConfiguration? {
        var configuration = TLSConfiguration.makeClientConfiguration()
        switch sslMode {
        case .disable:
            return nil
        case .require:
            configuration.certificateVerification = .none
        case .verifyFull:
            configuration.certificateVerification = .fullVerification
            configuration.trustRoots =
                try sslRootCert.map { path throws(LedgerError) in .certificates(try Self.certificates(at: path)) }
                ?? .default
        }
        return configuration
    }

    /// The pool's TLS mode: TLS is required whenever `sslMode` encrypts, never `prefer`.
    func clientTLS() throws(LedgerError) -> PostgresClient.Configuration.TLS {
        try tlsConfiguration().map { .require($0) } ?? .disable
    }

    /// The same for a single connection, which takes a ready `NIOSSLContext`.
    func connectionTLS() throws(LedgerError) -> PostgresConnection.Configuration.TLS {
        guard let configuration = try tlsConfiguration() else { return .disable }
        do {
            return .require(try NIOSSLContext(configuration: configuration))
        } catch {
            throw LedgerError(code: .configuration, message: "ledger.url: the TLS settings are unusable: \(error)")
        }
    }

    private static func certificates(at path: String) throws(LedgerError) -> [NIOSSLCertificate] {
        guard let data = FileManager.default.contents(atPath: path) else {
            let why = FileManager.default.fileExists(atPath: path) ? "cannot be read" : "does not exist"
            throw LedgerError(code: .configuration, message: "ledger.url: sslrootcert \(path) \(why)")
        }
        let certificates = try? NIOSSLCertificate.fromPEMBytes(Array(data))
        guard let certificates, !certificates.isEmpty else {
            throw LedgerError(code: .configuration, message: "ledger.url: sslrootcert \(path) holds no PEM certificate")
        }
        return certificates
    }
}

import Fulfilment

/// The `sslmode` of a `postgres://` ledger URL: libpq's names, for the modes that never fall back silently.
public enum PostgresSSLMode: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// No TLS: only for a database on loopback or a network you trust.
    case disable
    /// TLS, but the server's certificate is not verified: encrypted, open to a man in the middle.
    case require
    /// TLS; the certificate chain is verified against `sslrootcert` (or the system's roots) and the host name
    /// against the certificate.
    case verifyFull = "verify-full"

    /// The mode when `ledger.url` names none: `disable` on loopback, where nothing crosses a network, else
    /// `verify-full`.
    public static func `default`(forHost host: String) -> PostgresSSLMode {
        LoopbackHost.contains(host) ? .disable : .verifyFull
    }

    /// Parses an `sslmode` value, refusing libpq's modes that this worker does not offer.
    ///
    /// - Throws: ``LedgerError`` with code `invalidURL`, naming `ledger.url` and the supported modes.
    public init(parsing text: String) throws(LedgerError) {
        if let mode = PostgresSSLMode(rawValue: text) {
            self = mode
            return
        }
        let supported = Self.allCases.map(\.rawValue).joined(separator: ", ")
        let why: String =
            switch text {
            case "prefer", "allow":
                "\(text) silently falls back to an unencrypted connection (password and purchase tokens in clear) "
                    + "when the server or a man in the middle refuses TLS"
            case "verify-ca":
                "verify-ca checks the certificate chain but not the host name; use verify-full"
            default:
                "it is not an sslmode"
            }
        throw LedgerError(
            code: .invalidURL, message: "ledger.url: sslmode=\(text) is not supported (\(why)); supported: \(supported)"
        )
    }

    public var description: String { rawValue }

    /// Whether the connection is encrypted.
    public var encrypts: Bool { self != .disable }
}

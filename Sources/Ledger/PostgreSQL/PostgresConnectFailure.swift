import Fulfilment
import NIOCore
import NIOSSL
import PostgresNIO

/// Why one connection attempt to the PostgreSQL ledger failed, sorted into what waiting can heal and what it
/// cannot. `reason` names no password: it is built from SQLSTATEs, the server's message and NIO's error names.
struct PostgresConnectFailure: Error, Sendable {
    enum Kind: Sendable, Hashable {
        /// The server answered and refused: a certificate that does not verify, credentials, an unknown database,
        /// TLS refused while `sslmode` requires it. Retrying cannot help.
        case configuration
        /// Refused or timed-out connections, name resolution, a database starting or shutting down: retry.
        case transient
    }

    var kind: Kind
    var reason: String

    init(kind: Kind, reason: String) {
        self.kind = kind
        self.reason = reason
    }

    /// Sorts an error from `PostgresConnection.connect`.
    init(classifying error: any Error, url: PostgresLedgerURL) {
        guard let error = error as? PSQLError else {
            self.init(classifyingTransport: error, url: url)
            return
        }
        switch error.code {
        case .server:
            self.init(
                sqlState: error.serverInfo?[.sqlState] ?? "", message: error.serverInfo?[.message] ?? "", url: url)
        case .sslUnsupported:
            self.init(
                kind: .configuration,
                reason: "the server at \(url.endpoint) does not accept TLS, which sslmode=\(url.sslMode) requires; "
                    + "turn ssl on at the server (sslmode=disable sends the password in clear: only on loopback "
                    + "or a trusted network)")
        case .receivedUnencryptedDataAfterSSLRequest:
            self.init(
                kind: .configuration,
                reason: "the server at \(url.endpoint) answered the TLS request with unencrypted data: "
                    + "not a PostgreSQL server, or one in the middle")
        case .unsupportedAuthMechanism, .authMechanismRequiresPassword, .saslError:
            self.init(
                kind: .configuration,
                reason: "authentication of user \"\(url.username)\" failed (\(error.code)): "
                    + "check the user and password in ledger.url")
        case .failedToAddSSLHandler:
            self.init(kind: .configuration, reason: "TLS could not be set up: \(Self.describe(error.underlying))")
        default:
            self.init(classifyingTransport: error.underlying ?? error, url: url)
        }
    }

    /// SQLSTATEs the server sends instead of completing the start-up: classes 28 (authorization), 3D000 (no such
    /// database) and 42501 (no CONNECT privilege) cannot heal; 57P0x (starting or shutting down), 53xxx (too many
    /// connections, out of memory) and 08xxx can.
    private init(sqlState: String, message: String, url: PostgresLedgerURL) {
        let detail = "\(sqlState) \(message)"
        switch sqlState {
        case let state where state.hasPrefix("28"):
            self.init(
                kind: .configuration,
                reason:
                    "the server refused user \"\(url.username)\" (\(detail)): check the user and password in ledger.url"
            )
        case "3D000":
            self.init(
                kind: .configuration,
                reason: "database \"\(url.database)\" does not exist on \(url.endpoint) (\(detail))")
        case "42501":
            self.init(
                kind: .configuration,
                reason: "user \"\(url.username)\" may not connect to \"\(url.database)\" (\(detail))")
        case "57P03":
            self.init(kind: .transient, reason: "the database is starting up (\(detail))")
        default:
            self.init(kind: .transient, reason: "the server refused the connection for now (\(detail))")
        }
    }

    /// Errors below the PostgreSQL protocol: TLS handshakes that fail verification cannot heal; the rest
    /// (refused, reset, timed out, unresolvable) can.
    private init(classifyingTransport error: any Error, url: PostgresLedgerURL) {
        switch error {
        case let error as NIOSSLError:
            switch error {
            case .uncleanShutdown:
                self.init(kind: .transient, reason: "the server closed the connection during the TLS handshake")
            default:
                self.init(kind: .configuration, reason: Self.tlsFailure(error, url: url))
            }
        case let error as NIOSSLExtraError where error == .failedToValidateHostname:
            self.init(
                kind: .configuration,
                reason: "the certificate of \(url.endpoint) verifies but does not name \(url.host) "
                    + "(sslmode=verify-full checks the host name): connect by a name the certificate holds")
        case let error as NIOSSLExtraError:
            self.init(kind: .configuration, reason: Self.tlsFailure(error, url: url))
        case let error as ChannelError:
            if case .connectTimeout = error {
                self.init(kind: .transient, reason: "connecting to \(url.endpoint) timed out")
            } else {
                self.init(kind: .transient, reason: "connecting to \(url.endpoint) failed: \(error)")
            }
        default:
            self.init(kind: .transient, reason: "connecting to \(url.endpoint) failed: \(Self.describe(error))")
        }
    }

    private static func tlsFailure(_ error: any Error, url: PostgresLedgerURL) -> String {
        guard url.sslMode == .verifyFull else {
            return "the TLS handshake with \(url.endpoint) failed (sslmode=\(url.sslMode)): \(error)"
        }
        let trust = url.sslRootCert.map { "sslrootcert \($0)" } ?? "the system's trust roots"
        return "the TLS handshake with \(url.endpoint) failed: its certificate does not verify against \(trust) "
            + "(sslmode=verify-full): \(error)"
    }

    private static func describe(_ error: (any Error)?) -> String {
        guard let error else { return "unknown error" }
        if let error = error as? PSQLError { return "\(error.code)" }
        return "\(error)"
    }
}

import Foundation
import Fulfilment
import Wire

/// A `postgres://user:pass@host:port/db?sslmode=…&sslrootcert=…` ledger URL.
///
/// `sslmode` is `disable`, `require` or `verify-full` (``PostgresSSLMode``); without one, `verify-full` unless the
/// host is loopback. `sslrootcert` is a PEM file of the CAs trusted for `verify-full` (`system`, or none: the
/// system's trust roots), and implies `verify-full` when no `sslmode` is given.
public struct PostgresLedgerURL: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public var sslMode: PostgresSSLMode
    /// The PEM file of trusted CAs for `verify-full`; `nil`: the system's trust roots.
    public var sslRootCert: String?

    public init(
        host: String, port: Int = 5432, username: String, password: String?, database: String,
        sslMode: PostgresSSLMode? = nil, sslRootCert: String? = nil
    ) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.sslMode = sslMode ?? (sslRootCert == nil ? .default(forHost: host) : .verifyFull)
        self.sslRootCert = sslRootCert
    }

    /// The query parameters `ledger.url` understands; any other is refused rather than silently ignored.
    static let parameters: Set<String> = ["sslmode", "sslrootcert"]

    /// - Throws: ``LedgerError`` with code `invalidURL`, naming `ledger.url`; its message never holds the password.
    public init(_ text: String) throws(LedgerError) {
        guard text.hasPrefix("postgres://") || text.hasPrefix("postgresql://"),
            let components = URLComponents(string: text),
            let rawHost = components.hostAsWritten, !rawHost.isEmpty
        else {
            throw LedgerError(
                code: .invalidURL, message: "ledger.url: postgres URLs look like postgres://user:pass@host:port/db")
        }
        let database = String(components.path.drop { $0 == "/" })
        guard !database.isEmpty, let user = components.percentEncodedUser?.removingPercentEncoding, !user.isEmpty else {
            throw LedgerError(
                code: .invalidURL,
                message: "ledger.url: postgres URLs need a user and a database: postgres://user:pass@host:port/db")
        }
        var values: [String: String] = [:]
        for item in components.queryItems ?? [] {
            guard Self.parameters.contains(item.name) else {
                let supported = Self.parameters.sorted().joined(separator: ", ")
                throw LedgerError(
                    code: .invalidURL, message: "ledger.url: unknown parameter '\(item.name)' (supported: \(supported))"
                )
            }
            guard values[item.name] == nil else {
                throw LedgerError(code: .invalidURL, message: "ledger.url: parameter '\(item.name)' is given twice")
            }
            guard let value = item.value, !value.isEmpty else {
                throw LedgerError(code: .invalidURL, message: "ledger.url: parameter '\(item.name)' has no value")
            }
            values[item.name] = value
        }
        let sslMode = try values["sslmode"].map { text throws(LedgerError) in try PostgresSSLMode(parsing: text) }
        let rootCert = values["sslrootcert"].flatMap { $0 == "system" ? nil : $0 }
        if let sslMode, values["sslrootcert"] != nil, sslMode != .verifyFull {
            throw LedgerError(
                code: .invalidURL,
                message: "ledger.url: sslrootcert is only used with sslmode=verify-full, not with sslmode=\(sslMode)")
        }
        let host = rawHost.hasPrefix("[") && rawHost.hasSuffix("]") ? String(rawHost.dropFirst().dropLast()) : rawHost
        self.init(
            host: host, port: components.port ?? 5432, username: user,
            password: components.percentEncodedPassword.map { $0.removingPercentEncoding ?? $0 }, database: database,
            sslMode: sslMode ?? (values["sslrootcert"] != nil ? .verifyFull : nil), sslRootCert: rootCert)
    }

    /// The URL with its password replaced and the sslmode in force, for logs and `check-config`.
    public var description: String {
        let hostPart = host.contains(":") ? "[\(host)]" : host
        var text = "postgres://\(username)\(password == nil ? "" : ":<redacted>")@\(hostPart):\(port)/\(database)"
        text += "?sslmode=\(sslMode)"
        if let sslRootCert { text += "&sslrootcert=\(sslRootCert)" }
        return text
    }

    /// `host:port`, for messages.
    var endpoint: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

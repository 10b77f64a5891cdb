import Foundation
import Fulfilment

/// `ledger.url`, parsed: `sqlite:///path/ledger.sqlite` or `postgres://user:pass@host:5432/db?sslmode=verify-full`.
public enum LedgerURL: Sendable, Hashable, CustomStringConvertible {
    case sqlite(path: String)
    case postgres(PostgresLedgerURL)

    /// - Throws: ``LedgerError`` with code `invalidURL`, naming `ledger.url`; its message never holds the password.
    public init(_ text: String) throws(LedgerError) {
        if text.hasPrefix("sqlite://") {
            let path = String(text.dropFirst("sqlite://".count))
            guard path.hasPrefix("/"), path.count > 1 else {
                throw LedgerError(
                    code: .invalidURL,
                    message: "ledger.url: sqlite URLs take an absolute path: sqlite:///path/ledger.sqlite")
            }
            self = .sqlite(path: path.removingPercentEncoding ?? path)
            return
        }
        guard text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") else {
            throw LedgerError(
                code: .invalidURL, message: "ledger.url must be sqlite:///path or postgres://user:pass@host:port/db")
        }
        self = .postgres(try PostgresLedgerURL(text))
    }

    /// The URL with its password replaced, for logs and `check-config`; a PostgreSQL URL shows its sslmode.
    public var description: String {
        switch self {
        case .sqlite(let path): "sqlite://\(path)"
        case .postgres(let url): url.description
        }
    }
}

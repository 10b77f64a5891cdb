import Foundation

/// `ledger.url`, parsed: `sqlite:///path/ledger.sqlite` or `postgres://user:pass@host:5432/db`.
public enum LedgerURL: Sendable, Hashable, CustomStringConvertible {
    case sqlite(path: String)
    case postgres(host: String, port: Int, username: String, password: String?, database: String)

    public init(_ text: String) throws(LedgerError) {
        if text.hasPrefix("sqlite://") {
            let path = String(text.dropFirst("sqlite://".count))
            guard path.hasPrefix("/"), path.count > 1 else {
                throw LedgerError(code: .invalidURL, message: "sqlite URLs take an absolute path: sqlite:///path/ledger.sqlite")
            }
            self = .sqlite(path: path.removingPercentEncoding ?? path)
            return
        }
        guard text.hasPrefix("postgres://") || text.hasPrefix("postgresql://"), let components = URLComponents(string: text),
            let host = components.host, !host.isEmpty
        else {
            throw LedgerError(
                code: .invalidURL, message: "ledger.url must be sqlite:///path or postgres://user:pass@host:port/db")
        }
        let database = String(components.path.drop { $0 == "/" })
        guard !database.isEmpty, let user = components.user, !user.isEmpty else {
            throw LedgerError(code: .invalidURL, message: "postgres URLs need a user and a database: postgres://user:pass@host:port/db")
        }
        self = .postgres(
            host: host, port: components.port ?? 5432, username: user.removingPercentEncoding ?? user,
            password: components.password.map { $0.removingPercentEncoding ?? $0 }, database: database)
    }

    /// The URL with its password replaced, for logs and `check-config`.
    public var description: String {
        switch self {
        case .sqlite(let path): "sqlite://\(path)"
        case .postgres(let host, let port, let username, let password, let database):
            "postgres://\(username)\(password == nil ? "" : ":<redacted>")@\(host):\(port)/\(database)"
        }
    }
}

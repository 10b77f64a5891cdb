import Foundation
import Logging
import PostgresNIO

/// The PostgreSQL server `make test` starts (scripts/test-postgres.sh): read from `IAP_TEST_POSTGRES_URL` without
/// the code under test, so a broken `LedgerURL` cannot hide behind its own tests. It speaks TLS with a certificate
/// for `localhost` and `127.0.0.1` signed by the CA at `IAP_TEST_POSTGRES_CA`.
public struct PostgresTestServer: Sendable {
    public var host: String
    public var port: Int
    public var username: String
    public var password: String
    /// The database the test role owns; fresh databases are created from it.
    public var database: String

    public static func current() throws -> PostgresTestServer {
        try PostgresTestServer(url: try TestDatabases.postgresURL())
    }

    /// The server a `postgres://user:pass@host:port/db` URL names.
    public init(url text: String) throws {
        guard let components = URLComponents(string: text), let host = components.host, let username = components.user,
            let password = components.password
        else { throw TestSetupError(message: "\(text) is not postgres://user:pass@host:port/db") }
        self.init(
            host: host, port: components.port ?? 5432, username: username, password: password,
            database: String(components.path.dropFirst()))
    }

    public init(host: String, port: Int, username: String, password: String, database: String) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
    }

    /// The PEM file of the CA that signed the server's certificate.
    public static func certificateAuthority() throws -> String {
        guard let path = ProcessInfo.processInfo.environment["IAP_TEST_POSTGRES_CA"], !path.isEmpty else {
            throw TestSetupError(
                message: "IAP_TEST_POSTGRES_CA is not set: run the tests with `make test` (scripts/test-postgres.sh ca)"
            )
        }
        return path
    }

    /// A CA that signed nothing the server presents (made beside the real one).
    public static func untrustedCertificateAuthority() throws -> String {
        URL(fileURLWithPath: try certificateAuthority()).deletingLastPathComponent().appendingPathComponent(
            "untrusted-ca.crt"
        )
        .path
    }

    /// A `postgres://` URL for `database`, with `query` (`sslmode=…&…`) when given.
    public func url(database: String, host: String? = nil, password: String? = nil, query: String? = nil) -> String {
        "postgres://\(username):\(password ?? self.password)@\(host ?? self.host):\(port)/\(database)"
            + (query.map { "?\($0)" } ?? "")
    }

    /// Creates an empty database and returns its name.
    /// Creates an empty database and answers its name. A server under load (a private one just started, many lanes
    /// creating databases from template1 at once) may refuse for a moment — a connection not taken yet, template1 in
    /// use (55006) — so a refusal is tried again for up to 20 s; the last one is thrown with PostgreSQL's own words
    /// (PSQLError's description hides them).
    public func createDatabase() async throws -> String {
        let name = "t_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(20))"
        let deadline = ContinuousClock.now + .seconds(20)
        while true {
            do {
                try await withAdminConnection { connection in
                    _ = try await connection.query(
                        PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: TestDatabases.quietLogger)
                }
                return name
            } catch let error as PSQLError {
                // A CREATE DATABASE that did go through before its answer was lost is found by the next try.
                if String(describing: error.serverInfo?[.sqlState] ?? "") == "42P04" { return name }
                guard ContinuousClock.now < deadline else {
                    throw TestSetupError(message: "CREATE DATABASE on \(host):\(port): \(String(reflecting: error))")
                }
                try await Task.sleep(for: .milliseconds(500))
            }
        }
    }

    /// Whether each connection the server holds to `database` is encrypted, as the server sees it (`pg_stat_ssl`).
    public func encryptionOfConnections(to database: String) async throws -> [Bool] {
        try await withAdminConnection { connection in
            var result: [Bool] = []
            let rows = try await connection.query(
                "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.datname = \(database)",
                logger: TestDatabases.quietLogger)
            for try await encrypted in rows.decode(Bool.self) { result.append(encrypted) }
            return result
        }
    }

    private func withAdminConnection<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await withConnection(to: database, body)
    }

    /// Runs `body` with a connection of the test's own to `database` (a plain one: the test looks over the
    /// worker's shoulder, it is not the worker).
    public func withConnection<T>(to database: String, _ body: (PostgresConnection) async throws -> T) async throws -> T
    {
        let connection = try await PostgresConnection.connect(
            configuration: .init(
                host: host, port: port, username: username, password: password, database: database, tls: .disable),
            id: 1, logger: TestDatabases.quietLogger)
        do {
            let result = try await body(connection)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }
}

extension PostgresTestServer {
    /// Gives the test role an empty schema of its own in `database` (`CREATE SCHEMA AUTHORIZATION CURRENT_USER`): with
    /// the default search path (`"$user", public`) it becomes the schema new tables go to. Answers the role's name.
    public func createRoleSchema(in database: String) async throws -> String {
        try await withConnection(to: database) { connection in
            let logger = TestDatabases.quietLogger
            try await connection.query("CREATE SCHEMA AUTHORIZATION CURRENT_USER", logger: logger)
            var role = ""
            for try await name in try await connection.query("SELECT current_user::text", logger: logger).decode(
                String.self)
            {
                role = name
            }
            return role
        }
    }
}

import Fulfilment
import Logging
import NIOCore
import PostgresNIO

extension PostgresLedgerStore {
    /// Runs `body` with a database of its own on the server `url` names (connected to through `url`'s database),
    /// created empty before and dropped after: a benchmark run's ledger, which meets no other run's rows.
    ///
    /// - Parameter name: the new database's name; letters, digits and underscores only.
    /// - Throws: ``LedgerError`` with code `configuration` for another name; what the server answers to CREATE or
    ///   DROP DATABASE; what `body` throws (the database is dropped then too).
    public static func withScratchDatabase<T: Sendable>(
        named name: String, on url: PostgresLedgerURL, logger: Logger,
        _ body: (PostgresLedgerURL) async throws -> T
    ) async throws -> T {
        guard !name.isEmpty, name.utf8.count <= 63,
            name.unicodeScalars.allSatisfy({
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_")
            })
        else {
            throw LedgerError(code: .configuration, message: "a scratch database's name takes letters, digits and _")
        }
        try await onServer(url, logger: logger, "CREATE DATABASE \(name)")
        var scratch = url
        scratch.database = name
        do {
            let result = try await body(scratch)
            try await onServer(url, logger: logger, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            return result
        } catch {
            try? await onServer(url, logger: logger, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            throw error
        }
    }

    private static func onServer(_ url: PostgresLedgerURL, logger: Logger, _ statement: String) async throws {
        var configuration = PostgresConnection.Configuration(
            host: url.host, port: url.port, username: url.username, password: url.password, database: url.database,
            tls: try url.connectionTLS())
        configuration.options.connectTimeout = TimeAmount(connectTimeout)
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        do {
            _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            try await connection.close()
        } catch {
            try? await connection.close()
            throw error
        }
    }
}

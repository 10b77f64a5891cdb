import Fulfilment
import Logging
import NIOCore
import PostgresNIO

extension PostgresLedgerStore {
    /// Runs `body` with a database of its own on the server `url` names (connected to through `url`'s database),
    /// created empty before and dropped after: a benchmark run's ledger, which meets no other run's rows.
    ///
    /// - Parameter name: the new database's name: lower-case letters, digits and underscores, not starting with a digit.
    /// - Throws: ``LedgerError`` with code `configuration` for another name; what the server answers to CREATE or
    ///   DROP DATABASE; what `body` throws (the database is dropped then too).
    public static func withScratchDatabase<T: Sendable>(
        named name: String, on url: PostgresLedgerURL, logger: Logger,
        _ body: (PostgresLedgerURL) async throws -> T
    ) async throws -> T {
        // Lower case only: the server folds an unquoted name, and the URL handed to `body` must name what it made.
        guard let first = name.unicodeScalars.first, ("a"..."z").contains(first) || first == "_", name.utf8.count <= 63,
            name.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" })
        else {
            throw LedgerError(
                code: .configuration,
                message: "a scratch database's name takes a-z, 0-9 and _, and starts with a letter or _")
        }
        // CREATE DATABASE copies template1 and is refused while another session is connected to it (an autovacuum
        // worker, say): a moment later it goes through.
        for attempt in 1... {
            do {
                try await onServer(url, logger: logger, "CREATE DATABASE \(name)")
                break
            } catch  where attempt < 3 {
                try await Task.sleep(for: .seconds(1))
            }
        }
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

    /// - Throws: ``LedgerError`` with code `query`, naming the statement and what the server said.
    private static func onServer(_ url: PostgresLedgerURL, logger: Logger, _ statement: String) async throws {
        var configuration = PostgresConnection.Configuration(
            host: url.host, port: url.port, username: url.username, password: url.password, database: url.database,
            tls: try url.connectionTLS())
        configuration.options.connectTimeout = TimeAmount(connectTimeout)
        do {
            let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
            do {
                _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                try await connection.close()
            } catch {
                try? await connection.close()
                throw error
            }
        } catch {
            throw LedgerError(code: .query, message: "PostgreSQL at \(url.endpoint): \(statement): \(describe(error))")
        }
    }
}

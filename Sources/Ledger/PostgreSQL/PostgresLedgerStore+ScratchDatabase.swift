import Fulfilment
import Logging
import NIOCore
import PostgresNIO

extension PostgresLedgerStore {
    /// Runs `body` with a database of its own on the server `url` names (connected to through `url`'s database),
    /// created empty before and dropped after: a benchmark run's ledger, which meets no other run's rows.
    ///
    /// - Parameter name: the new database's name: lower-case letters, digits and underscores, not starting with a digit.
    /// - Throws: ``LedgerError`` with code `configuration` for another name; a refused CREATE DATABASE (naming the
    ///   statement and the server's answer); what `body` throws (the database is dropped then too; a DROP that fails
    ///   is logged, not thrown).
    public static func withScratchDatabase<T: Sendable>(
        named name: String, on url: PostgresLedgerURL, logger: Logger,
        _ body: (PostgresLedgerURL) async throws -> T
    ) async throws -> T {
        // Lower case only: the same name quoted or not, so whoever reads the URL handed to `body` finds what it made.
        guard let first = name.unicodeScalars.first, ("a"..."z").contains(first) || first == "_", name.utf8.count <= 63,
            name.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" })
        else {
            throw LedgerError(
                code: .configuration,
                message: "a scratch database's name takes a-z, 0-9 and _, and starts with a letter or _")
        }
        // Quoted: a name that is a keyword (`user`) is still a name.
        let quoted = "\"\(name)\""
        // CREATE DATABASE copies template1 and is refused while another session is connected to it (55006, an
        // autovacuum worker, say): a moment later it goes through. Nothing else is retried.
        for attempt in 1... {
            do {
                try await onServer(url, logger: logger, "CREATE DATABASE \(quoted)")
                break
            } catch let error as ScratchStatementError {
                guard error.sqlState == "55006", attempt < 3 else { throw error.error }
                try await Task.sleep(for: .seconds(1))
            }
        }
        var scratch = url
        scratch.database = name
        let result: T
        do {
            result = try await body(scratch)
        } catch {
            await drop(quoted, on: url, logger: logger)
            throw error
        }
        await drop(quoted, on: url, logger: logger)
        return result
    }

    /// Drops the scratch database, also when the run was cancelled (a task of its own); a failure is logged, not
    /// thrown, so that a run's result is not lost to it.
    private static func drop(_ quoted: String, on url: PostgresLedgerURL, logger: Logger) async {
        let statement = "DROP DATABASE IF EXISTS \(quoted) WITH (FORCE)"
        do {
            try await Task { try await onServer(url, logger: logger, statement) }.value
        } catch {
            logger.error("a scratch database was left on the server", metadata: ["error": "\(error)"])
        }
    }

    /// - Throws: ``ScratchStatementError``, naming the statement and what the server said.
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
            throw ScratchStatementError(
                sqlState: (unwrapped(error) as? PSQLError)?.serverInfo?[.sqlState],
                error: LedgerError(
                    code: .query, message: "PostgreSQL at \(url.endpoint): \(statement): \(describe(error))"))
        }
    }
}

/// A scratch database's statement refused, with the server's SQLSTATE for the retry to read.
struct ScratchStatementError: Error, CustomStringConvertible {
    let sqlState: String?
    let error: LedgerError

    var description: String { error.description }
}

import Fulfilment
import Logging
import NIOCore
import PostgresNIO

extension PostgresLedgerStore {
    /// Makes one real connection with the pool's settings before anything uses the ledger, so that a ledger that
    /// cannot work is reported at start instead of being retried for ever by the pool. A database that cannot be
    /// reached yet is retried as `retry` says, with one warning per failed attempt; one that answers and refuses
    /// (certificate, credentials, database, TLS) is logged at error level and thrown at once.
    ///
    /// - Throws: ``LedgerError`` with code `configuration` for a refusal; with code `unavailable` when
    ///   `retry.maxAttempts` attempts could not reach the database; `CancellationError` when the task is cancelled,
    ///   also while waiting between attempts.
    public func waitUntilUsable(retry: LedgerConnectRetry) async throws {
        var attempt = 0
        while true {
            attempt += 1
            let failure: PostgresConnectFailure
            do {
                let tlsVersion = try await connectOnce()
                logger.info(
                    "ledger reachable",
                    metadata: [
                        "ledger.url": "\(url)", "ledger.tls": "\(tlsVersion ?? "off")", "ledger.attempt": "\(attempt)",
                    ])
                return
            } catch let error as PostgresConnectFailure {
                failure = error
            }
            try Task.checkCancellation()
            switch failure.kind {
            case .configuration:
                logger.error(
                    "ledger refuses this configuration: fix ledger.url or the database server",
                    metadata: ["ledger.url": "\(url)", "ledger.problem": "\(failure.reason)"])
                throw LedgerError(code: .configuration, message: "ledger.url (\(url)): \(failure.reason)")
            case .transient:
                if let maxAttempts = retry.maxAttempts, attempt >= maxAttempts {
                    throw LedgerError(
                        code: .unavailable,
                        message: "ledger.url (\(url)): \(failure.reason) (\(attempt) attempt\(attempt == 1 ? "" : "s"))"
                    )
                }
                let wait = retry.backoff(afterAttempt: attempt)
                logger.warning(
                    "ledger not reachable yet, retrying",
                    metadata: [
                        "ledger.url": "\(url)", "ledger.problem": "\(failure.reason)", "ledger.attempt": "\(attempt)",
                        "ledger.retry_in_ms": "\(Int(wait / .milliseconds(1)))",
                    ])
                try await Task.sleep(for: wait)
            }
        }
    }

    /// The TLS protocol version of a pooled connection (`TLSv1.3`), or `nil` when it is not encrypted.
    public func tlsVersion() async throws -> String? {
        do {
            return try await client.withConnection { connection in
                try await Self.tlsVersion(on: connection, logger: logger)
            }
        } catch {
            throw LedgerError(code: .query, message: "PostgreSQL: \(Self.describe(error))")
        }
    }

    /// One connection, opened and closed; returns its TLS version.
    ///
    /// - Throws: ``PostgresConnectFailure``, or `CancellationError`.
    func connectOnce() async throws -> String? {
        var configuration = PostgresConnection.Configuration(
            host: url.host, port: url.port, username: url.username, password: url.password, database: url.database,
            tls: connectionTLS)
        configuration.options.connectTimeout = TimeAmount(Self.connectTimeout)
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        } catch {
            if error is CancellationError || Task.isCancelled { throw CancellationError() }
            throw PostgresConnectFailure(classifying: error, url: url)
        }
        // Only informative: a server without pg_stat_ssl (or a pooler in front) still makes a usable ledger.
        let version = try? await Self.tlsVersion(on: connection, logger: logger)
        try? await connection.close()
        return version ?? nil
    }

    private static func tlsVersion(on connection: PostgresConnection, logger: Logger) async throws -> String? {
        let rows = try await connection.query(
            "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()", logger: logger)
        for try await (encrypted, version) in rows.decode((Bool, String?).self) {
            return encrypted ? version ?? "on" : nil
        }
        return nil
    }
}

import Fulfilment
import Logging

/// Opens the store `ledger.url` names.
public enum LedgerStores {
    /// Runs `body` with the store for `url`, migrated when `migrate` is set; for PostgreSQL the connection pool
    /// runs for the duration of `body`.
    ///
    /// A PostgreSQL ledger is first connected to once, with the pool's settings
    /// (``PostgresLedgerStore/waitUntilUsable(retry:)``): a database that refuses this configuration fails here,
    /// with code `configuration`; one that cannot be reached yet is retried as `connectRetry` says.
    ///
    /// - Parameters:
    ///   - connectRetry: how long to wait for a PostgreSQL database that cannot be reached yet: `.once` for
    ///     commands that look into the ledger, `.untilConnected` for the daemon.
    ///   - convertsToIncrementalVacuum: the daemon's start converts a SQLite ledger made before retention, once
    ///     (``SQLiteLedgerStore/prepareIncrementalVacuum()``); other commands leave the file as it is.
    ///   - minFreeBytes: `ledger.min_free_bytes`, the daemon's floor of free space for a SQLite ledger (0: none).
    /// - Throws: ``LedgerError`` for a bad URL (`invalidURL`), a ledger that refuses this configuration
    ///   (`configuration`), an unreachable database (`unavailable`) or a failed migration; `CancellationError` when
    ///   cancelled while waiting for the database; or what `body` throws.
    public static func withStore<T: Sendable>(
        url: String, logger: Logger, migrate: Bool = true, maxConnections: Int = 20,
        connectRetry: LedgerConnectRetry = .once, convertsToIncrementalVacuum: Bool = false, minFreeBytes: Int64 = 0,
        _ body: @Sendable (any SQLLedgerStore) async throws -> T
    ) async throws -> T {
        switch try LedgerURL(url) {
        case .sqlite(let path):
            let store = try SQLiteLedgerStore(
                path: path, logger: logger, convertsToIncrementalVacuum: convertsToIncrementalVacuum,
                minFreeBytes: minFreeBytes)
            do {
                if migrate { try await store.migrate() }
                let result = try await body(store)
                try await store.close()
                return result
            } catch {
                try? await store.close()
                throw error
            }
        case .postgres(let postgresURL):
            let store = try PostgresLedgerStore(url: postgresURL, maxConnections: maxConnections, logger: logger)
            try await store.waitUntilUsable(retry: connectRetry)
            return try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask {
                    try await store.run()
                    return nil
                }
                defer { group.cancelAll() }
                if migrate { try await store.migrate() }
                return try await body(store)
            }
        }
    }
}

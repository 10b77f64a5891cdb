import Logging

/// Opens the store `ledger.url` names.
public enum LedgerStores {
    /// Runs `body` with the store for `url`, migrated when `migrate` is set; for PostgreSQL the connection pool
    /// runs for the duration of `body`.
    ///
    /// - Throws: ``LedgerError`` for a bad URL, an unreachable database or a failed migration; or what `body` throws.
    public static func withStore<T: Sendable>(
        url: String, logger: Logger, migrate: Bool = true, maxConnections: Int = 20,
        _ body: @Sendable (any LedgerStore) async throws -> T
    ) async throws -> T {
        switch try LedgerURL(url) {
        case .sqlite(let path):
            let store = try SQLiteLedgerStore(path: path)
            do {
                if migrate { try await store.migrate() }
                let result = try await body(store)
                try await store.close()
                return result
            } catch {
                try? await store.close()
                throw error
            }
        case .postgres(let host, let port, let username, let password, let database):
            let store = PostgresLedgerStore(
                host: host, port: port, username: username, password: password, database: database,
                maxConnections: maxConnections, logger: logger)
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

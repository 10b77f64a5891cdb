import Fulfilment

/// Named schema migrations: each runs once, in order, recorded in `iap_schema_migrations`.
public struct LedgerMigration: Sendable {
    public var name: String
    /// Statements run in the migration's transaction: quick ones (new tables, nullable columns, a default).
    public var sql: [String]
    /// Indexes on tables that may be large. On PostgreSQL they are built `CONCURRENTLY` after the transaction
    /// commits, so other instances keep writing while they build; an interrupted build (an invalid index) is dropped
    /// and built again at the next start. On SQLite (one instance) they are part of the transaction.
    public var indexes: [LedgerIndex]
    /// Whether instances of versions before this migration can no longer run against the ledger once it ran (a column
    /// they write dropped or made required, a meaning changed). Recorded with the migration, so an older instance
    /// meeting it refuses to start instead of misbehaving.
    public var breaksOlderVersions: Bool

    public init(name: String, sql: [String], indexes: [LedgerIndex] = [], breaksOlderVersions: Bool = false) {
        self.name = name
        self.sql = sql
        self.indexes = indexes
        self.breaksOlderVersions = breaksOlderVersions
    }
}

/// An index a migration adds: its name and what follows `ON` (`grants (payment_id) WHERE payment_id IS NOT NULL`).
public struct LedgerIndex: Sendable, Hashable {
    public var name: String
    public var definition: String

    public init(_ name: String, on definition: String) {
        self.name = name
        self.definition = definition
    }

    /// The statement, plain (in a transaction) or concurrent.
    func create(concurrently: Bool) -> String {
        "CREATE INDEX \(concurrently ? "CONCURRENTLY " : "")IF NOT EXISTS \(name) ON \(definition)"
    }
}

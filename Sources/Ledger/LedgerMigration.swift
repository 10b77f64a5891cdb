import Fulfilment
/// Named schema migrations: each runs once, in order, recorded in `iap_schema_migrations`.
public struct LedgerMigration: Sendable {
    public var name: String
    public var sql: [String]
}

import Foundation
import Fulfilment
import Logging
import PostgresNIO
import Wire

/// Migrations that other instances can run beside: instances of this version and older ones share the ledger during a
/// rolling upgrade (docs/deployment.md).
///
/// - The schema statements run in one transaction under an advisory lock (instances starting together migrate once),
///   with a `lock_timeout`: a statement that must wait for another instance's transaction gives up after
///   ``lockTimeout`` — so the writes queued behind it wait no longer — and the migration is tried again.
/// - Indexes on tables that may be large are built `CONCURRENTLY` afterwards (writes go on while they build), one
///   instance at a time; an index a killed build left invalid is dropped and built again at the next start.
/// - Every migration records whether it breaks older versions: an instance that meets a migration it does not know
///   and that breaks it refuses to start, naming it; one that only adds is run beside.
extension PostgresLedgerStore {
    static let lockTimeout = "1s"
    static let migrationAttempts = 30
    /// Serialises the concurrent index builds of instances starting together (a session lock: it outlives statements).
    static let indexLockID: Int64 = 0x1A9_0002

    func migrateSchema() async throws {
        var attempt = 1
        while true {
            do {
                return try await migrateSchemaOnce()
            } catch  where ["55P03", "40P01"].contains(Self.sqlState(of: error)) && attempt < Self.migrationAttempts {
                // lock_not_available: another instance's transaction holds a table this migration alters (or a lock
                // cycle the server broke by failing this side).
                logger.warning(
                    "ledger migration waits for another transaction; trying again",
                    metadata: ["ledger.attempt": "\(attempt)"])
                attempt += 1
                try await Task.sleep(for: .milliseconds(min(200 * attempt, 2_000)))
            }
        }
    }

    private func migrateSchemaOnce() async throws {
        let known = LedgerSchema.migrations(.postgres)
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.migrationLockID))", logger: logger)
            try await Self.checkPlacement(connection, logger: logger)
            try await connection.query(
                "CREATE TABLE IF NOT EXISTS iap_schema_migrations (name TEXT PRIMARY KEY, applied_at_ms BIGINT NOT NULL)",
                logger: logger)
            try await connection.query(
                PostgresQuery(unsafeSQL: "SET LOCAL lock_timeout = '\(Self.lockTimeout)'"), logger: logger)
            // Only when missing: even `IF NOT EXISTS` takes the table's exclusive lock, which a reader (a pg_dump) holds
            // off.
            var hasColumn = false
            for try await _ in try await connection.query(
                """
                SELECT 1 FROM information_schema.columns
                WHERE table_name = 'iap_schema_migrations' AND column_name = 'breaks_older'
                  AND table_schema = current_schema()
                """, logger: logger)
            {
                hasColumn = true
            }
            if !hasColumn {
                try await connection.query(
                    "ALTER TABLE iap_schema_migrations ADD COLUMN breaks_older BOOLEAN NOT NULL DEFAULT false",
                    logger: logger)
            }
            var applied: [String: Bool] = [:]
            for try await (name, breaks) in try await connection.query(
                "SELECT name, breaks_older FROM iap_schema_migrations", logger: logger
            ).decode((String, Bool).self) {
                applied[name] = breaks
            }
            try Self.checkCompatible(applied: applied, known: known.map(\.name), logger: logger)
            for migration in known where applied[migration.name] == nil {
                for statement in migration.sql {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                let now = Date().epochMilliseconds
                try await connection.query(
                    """
                    INSERT INTO iap_schema_migrations (name, applied_at_ms, breaks_older)
                    VALUES (\(migration.name), \(now), \(migration.breaksOlderVersions))
                    """, logger: logger)
                logger.info("ledger migration applied", metadata: ["ledger.migration": "\(migration.name)"])
            }
        }
    }

    /// The oldest server the migrations run on: `005_reconcile_scan_xid` needs `xid8` and `pg_current_xact_id()`.
    static let minimumServerVersion = 130_000

    /// Refuses, before anything is created, a server too old for the migrations, and a ledger this connection would not
    /// see: with the default search path (`"$user", public`), an empty schema named after the role, made after the
    /// ledger was built in `public`, becomes the schema new tables go to. Migrating there would build a second, empty
    /// ledger and every statement would then find it instead of the real one (its grants out of sight: a redelivered
    /// purchase granted again). Two schemas of the path that each hold a ledger are refused too.
    static func checkPlacement(_ connection: PostgresConnection, logger: Logger) async throws {
        var version = 0
        for try await text in try await connection.query("SHOW server_version_num", logger: logger).decode(String.self)
        {
            version = Int(text) ?? 0
        }
        guard version >= minimumServerVersion else {
            throw LedgerError(
                code: .configuration,
                message: "the ledger needs PostgreSQL 13 or later; this server is version \(version / 10_000)")
        }
        var current: String?
        var holders: [String] = []
        for try await (schema, holder) in try await connection.query(
            """
            SELECT current_schema(), n.nspname FROM pg_catalog.pg_class c
            JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relname = 'iap_schema_migrations' AND c.relkind = 'r' AND n.nspname = ANY (current_schemas(false))
            """, logger: logger
        ).decode((String?, String).self) {
            current = schema
            holders.append(holder)
        }
        guard let current, !holders.isEmpty else { return }
        guard holders.count == 1 else {
            // Two ledgers on the path (one made in the role's schema by a start before this check): which one holds
            // the grants is the operator's call, never this start's.
            throw LedgerError(
                code: .configuration,
                message: "schemas \(holders.sorted().joined(separator: " and ")) on this connection's search path each "
                    + "hold a ledger, and unqualified statements use \(current): set the role's search_path to the one "
                    + "that holds the grants (ALTER ROLE … SET search_path) and drop the other")
        }
        guard !holders.contains(current) else { return }
        throw LedgerError(
            code: .configuration,
            message:
                "the ledger's tables are in schema \(holders.sorted().joined(separator: ", ")), but this connection "
                + "creates tables in schema \(current), first on its search path: set the role's search_path to the "
                + "ledger's schema (ALTER ROLE … SET search_path), or drop the empty schema \(current)")
    }

    /// Refuses a ledger whose schema has a migration this version does not know and cannot run beside.
    /// The error a transaction's closure threw (postgres-nio wraps it), else the error itself.
    static func unwrapped(_ error: any Error) -> any Error {
        guard let error = error as? PostgresTransactionError else { return error }
        return error.closureError ?? error.beginError ?? error.commitError ?? error
    }

    static func sqlState(of error: any Error) -> String? {
        (unwrapped(error) as? PSQLError)?.serverInfo?[.sqlState]
    }

    static func checkCompatible(applied: [String: Bool], known: [String], logger: Logger) throws {
        let unknown = applied.keys.filter { !known.contains($0) }.sorted()
        guard !unknown.isEmpty else { return }
        if let breaking = unknown.first(where: { applied[$0] == true }) {
            throw LedgerError(
                code: .migration,
                message: "the ledger's schema has migration \(breaking), which versions before it cannot run against: "
                    + "this iap-worker is older than the ledger; run the version that migrated it (or a newer one)")
        }
        logger.notice(
            "the ledger's schema is newer than this version's; its newer migrations only add, so this version runs beside",
            metadata: ["ledger.migrations": "\(unknown.joined(separator: ","))"])
    }

    /// Builds every migration's indexes that are missing or invalid, `CONCURRENTLY`, one instance at a time. An
    /// instance that finds another building waits without a statement open (a waiting statement holds a snapshot that
    /// the other's concurrent build would wait for: a deadlock), then finds the indexes built.
    func buildIndexes() async throws {
        let indexes = LedgerSchema.migrations(.postgres).flatMap(\.indexes)
        guard !indexes.isEmpty else { return }
        try await client.withConnection { connection in
            while true {
                var unbuilt: [LedgerIndex] = []
                for index in indexes where try await Self.validity(of: index, connection, logger) != true {
                    unbuilt.append(index)
                }
                if unbuilt.isEmpty { return }
                var locked = false
                for try await taken in try await connection.query(
                    "SELECT pg_try_advisory_lock(\(Self.indexLockID))", logger: logger
                ).decode(Bool.self) {
                    locked = taken
                }
                guard locked else {
                    logger.info("another instance builds the ledger's indexes; waiting for it")
                    try await Task.sleep(for: .seconds(1))
                    continue
                }
                do {
                    for index in unbuilt { try await Self.build(index, connection, logger) }
                    try await connection.query("SELECT pg_advisory_unlock(\(Self.indexLockID))", logger: logger)
                    return
                } catch {
                    _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.indexLockID))", logger: logger)
                    throw error
                }
            }
        }
    }

    /// Whether the index exists and is valid (`nil`: it does not exist).
    static func validity(of index: LedgerIndex, _ connection: PostgresConnection, _ logger: Logger) async throws
        -> Bool?
    {
        var valid: Bool?
        for try await isValid in try await connection.query(
            """
            SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
            WHERE c.relname = \(index.name) AND c.relkind = 'i' AND pg_table_is_visible(c.oid)
            """, logger: logger
        ).decode(Bool.self) {
            valid = isValid
        }
        return valid
    }

    static func build(_ index: LedgerIndex, _ connection: PostgresConnection, _ logger: Logger) async throws {
        let valid = try await validity(of: index, connection, logger)
        if valid == true { return }
        if valid == false {
            // Left by a build that was interrupted (a killed instance): it is maintained by writes but never used.
            logger.warning(
                "dropping an index an interrupted build left invalid", metadata: ["ledger.index": "\(index.name)"])
            try await connection.query(
                PostgresQuery(unsafeSQL: "DROP INDEX CONCURRENTLY IF EXISTS \(index.name)"), logger: logger)
        }
        logger.info("building a ledger index concurrently", metadata: ["ledger.index": "\(index.name)"])
        try await connection.query(PostgresQuery(unsafeSQL: index.create(concurrently: true)), logger: logger)
    }
}

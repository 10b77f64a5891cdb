import Foundation
import Fulfilment
import InMemoryLedger
import Ledger
import Logging
import PostgresNIO

/// The ledgers tests run on: a SQLite file in a temporary folder, a fresh database on the PostgreSQL server that
/// `make test` starts (`IAP_TEST_POSTGRES_URL`), and a ``MemoryLedger``. The conformance tests of the ledger's roles
/// run on all of them (`allCases`); a test of what only a database has — a `ledger.url`, a file, migrations, an
/// ``SQLLedgerStore``, a connection, a process — on ``sql``.
public enum LedgerBackend: String, CaseIterable, Sendable {
    case sqlite
    case postgres
    /// The roles without a database: no `ledger.url`, no ``SQLLedgerStore``.
    case memory

    /// The backends behind a `ledger.url`.
    public static let sql: [LedgerBackend] = [.sqlite, .postgres]
}

/// A ledger that plays every role: what the conformance tests run against.
public typealias TestLedger =
    PurchaseLedger & SweepLedger & LedgerProbe & ReconciliationLedger & RetentionLedger & HistoryLedger & AdminLedger
    & RefundLedger

public enum TestDatabases {
    public static var quietLogger: Logger {
        var logger = Logger(label: "test.ledger")
        logger.logLevel = .critical
        return logger
    }

    /// The PostgreSQL server's URL. In CI (`CI` set) a missing server is an error, never a skip.
    public static func postgresURL() throws -> String {
        if let url = ProcessInfo.processInfo.environment["IAP_TEST_POSTGRES_URL"], !url.isEmpty { return url }
        throw TestSetupError(
            message:
                "IAP_TEST_POSTGRES_URL is not set: run the tests with `make test`, which starts a PostgreSQL server")
    }

    /// A `ledger.url` for a new, empty ledger of `backend`, one of ``LedgerBackend/sql``.
    ///
    /// - Throws: ``TestSetupError`` for ``LedgerBackend/memory``, which has no URL.
    public static func freshLedgerURL(_ backend: LedgerBackend) async throws -> String {
        switch backend {
        case .memory:
            throw TestSetupError(message: "the memory ledger has no ledger.url: run this test on LedgerBackend.sql")
        case .sqlite:
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "iap-ledger-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            return "sqlite://\(folder.path)/ledger.sqlite"
        case .postgres:
            let server = try PostgresTestServer.current()
            return server.url(database: try await server.createDatabase())
        }
    }

    /// A `ledger.url` for a new, empty database on the PostgreSQL server `base` points at (a test's own server).
    public static func freshPostgresLedgerURL(base: String) async throws -> String {
        let server = try PostgresTestServer(url: base)
        return server.url(database: try await server.createDatabase())
    }

    /// Runs `body` with a fresh, migrated SQL store of `backend`, one of ``LedgerBackend/sql``.
    ///
    /// - Throws: ``TestSetupError`` for ``LedgerBackend/memory``, which is no SQL store.
    public static func withFreshStore<T: Sendable>(
        _ backend: LedgerBackend, maxConnections: Int = 20, _ body: @Sendable (any SQLLedgerStore) async throws -> T
    ) async throws -> T {
        let url = try await freshLedgerURL(backend)
        return try await LedgerStores.withStore(url: url, logger: quietLogger, maxConnections: maxConnections) {
            try await body($0)
        }
    }

    /// Runs `body` with a fresh, empty ledger (a migrated store, or a new ``MemoryLedger``); `maxConnections` is the
    /// SQL stores' pool size.
    public static func withFreshLedger<T: Sendable>(
        _ backend: LedgerBackend, maxConnections: Int = 20, _ body: @Sendable (any TestLedger) async throws -> T
    ) async throws -> T {
        switch backend {
        case .memory:
            try await body(MemoryLedger())
        case .sqlite, .postgres:
            try await withFreshStore(backend, maxConnections: maxConnections) { try await body($0) }
        }
    }
}

public struct TestSetupError: Error, CustomStringConvertible {
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}

extension TestDatabases {
    /// Brings an empty PostgreSQL database to the schema of an earlier version: the first `count` migrations, recorded
    /// as a ledger of that version records them (what an upgrade then finds).
    public static func applyMigrations(first count: Int, on connection: PostgresConnection) async throws {
        try await connection.query(
            "CREATE TABLE iap_schema_migrations (name TEXT PRIMARY KEY, applied_at_ms BIGINT NOT NULL)",
            logger: quietLogger)
        for migration in LedgerSchema.migrations(.postgres).prefix(count) {
            for statement in migration.sql {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: quietLogger)
            }
            try await connection.query(
                "INSERT INTO iap_schema_migrations VALUES (\(migration.name), 0)", logger: quietLogger)
        }
    }
}

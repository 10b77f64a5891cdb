import Foundation
import Fulfilment
import IAPTestSupport
import Logging
import PostgresNIO
import Synchronization
import Testing

@testable import Ledger

/// Migrations on a shared PostgreSQL ledger while other instances write: a statement that must wait for another
/// instance's transaction waits a moment (`lock_timeout`) and tries again, so the writes queued behind it are never
/// held for long; indexes are built concurrently, and one an interrupted build left invalid is built again; a schema
/// newer than a version can run against is refused by name.
@Suite("Online migrations on PostgreSQL", .serialized, .timeLimit(.minutes(5)))
struct OnlineMigrationTests {
    final class Writes: Sendable {
        let longest = Mutex<Duration>(.zero)
        let count = Mutex(0)
    }

    /// A ledger at the schema of the version before this one (migrations 001 and 002), with `rows` grants.
    static func previousLedger(rows: Int) async throws -> (url: String, database: String) {
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        try await server.withConnection(to: database) { (connection: PostgresConnection) async throws in
            try await TestDatabases.applyMigrations(first: 2, on: connection)
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO grants (payment_seq, user_id, gamebase_product_id, purchase_token, payment_id,
                            is_test_purchase, state, granted_at_ms)
                        SELECT 'old' || i, 'user' || (i % 1000), 'gems', 'tok' || i, 'GPA.old' || i, false, 'consumed',
                            1600000000000 + i
                        FROM generate_series(1, \(rows)) AS i
                        """), logger: TestDatabases.quietLogger)
        }
        return (server.url(database: database), database)
    }

    static func insertGrant(_ connection: PostgresConnection, _ seq: String) async throws {
        try await connection.query(
            """
            INSERT INTO grants (payment_seq, user_id, gamebase_product_id, purchase_token, is_test_purchase, state,
                granted_at_ms) VALUES (\(seq), 'writer', 'gems', 'tok', false, 'granted', 1700000000000)
            """, logger: TestDatabases.quietLogger)
    }

    @Test func anOpenWriteOnGrantsHoldsOtherInstancesWritesNoLongerThanAMoment() async throws {
        let server = try PostgresTestServer.current()
        let (url, database) = try await Self.previousLedger(rows: 200_000)
        let writes = Writes()
        try await server.withConnection(to: database) { holder in
            // An older instance's transaction that wrote to grants and stays open for 6 s.
            try await holder.query("BEGIN", logger: TestDatabases.quietLogger)
            try await Self.insertGrant(holder, "held")
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    // Another older instance, writing all along.
                    try await server.withConnection(to: database) { writer in
                        let end = ContinuousClock.now + .seconds(9)
                        var n = 0
                        while ContinuousClock.now < end {
                            let started = ContinuousClock.now
                            try await Self.insertGrant(writer, "w\(n)")
                            let took = ContinuousClock.now - started
                            writes.longest.withLock { $0 = max($0, took) }
                            writes.count.withLock { $0 += 1 }
                            n += 1
                            try await Task.sleep(for: .milliseconds(20))
                        }
                    }
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(500))
                    try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { _ in }
                }
                try await Task.sleep(for: .seconds(6))
                try await holder.query("COMMIT", logger: TestDatabases.quietLogger)
                try await group.waitForAll()
            }
        }
        let worst = writes.longest.withLock { $0 }
        print("online migration: \(writes.count.withLock { $0 }) writes beside it, the longest took \(worst)")
        // One second per statement that waits (lock_timeout), a little more on a loaded machine; 5.5 s without it.
        #expect(worst < .milliseconds(3_500), "a write waited \(worst) behind the migration")
        try await server.withConnection(to: database) { (connection: PostgresConnection) async throws in
            var names: [String] = []
            for try await name in try await connection.query(
                "SELECT name FROM iap_schema_migrations ORDER BY name", logger: TestDatabases.quietLogger
            )
            .decode(String.self) {
                names.append(name)
            }
            #expect(names == LedgerSchema.migrations(.postgres).map(\.name))
            #expect(try await Self.invalidOrMissing(connection).isEmpty)
        }
    }

    @Test func instancesStartingTogetherOnALedgerToMigrateAllStart() async throws {
        let (url, database) = try await Self.previousLedger(rows: 300_000)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<3 {
                group.addTask { try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { _ in } }
            }
            try await group.waitForAll()
        }
        try await PostgresTestServer.current().withConnection(to: database) {
            (connection: PostgresConnection) async throws in
            #expect(try await Self.invalidOrMissing(connection).isEmpty)
        }
    }

    static func invalidOrMissing(_ connection: PostgresConnection) async throws -> [String] {
        var missing: [String] = []
        for index in LedgerSchema.migrations(.postgres).flatMap(\.indexes) {
            var valid = false
            for try await isValid in try await connection.query(
                "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname = \(index.name)",
                logger: TestDatabases.quietLogger
            ).decode(Bool.self) {
                valid = isValid
            }
            if !valid { missing.append(index.name) }
        }
        return missing
    }

    @Test func anIndexAnInterruptedBuildLeftInvalidIsBuiltAgainAtTheNextStart() async throws {
        let server = try PostgresTestServer.current()
        let (url, database) = try await Self.previousLedger(rows: 1_000)
        try await server.withConnection(to: database) { (connection: PostgresConnection) async throws in
            // A concurrent build that fails half-way leaves its index behind, invalid (here: not unique).
            do {
                try await connection.query(
                    "CREATE UNIQUE INDEX CONCURRENTLY grants_payment_id ON grants (gamebase_product_id)",
                    logger: TestDatabases.quietLogger)
                Issue.record("the unique build should have failed")
            } catch {}
            #expect(try await Self.invalidOrMissing(connection).contains("grants_payment_id"))
        }
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { _ in }
        try await server.withConnection(to: database) { (connection: PostgresConnection) async throws in
            #expect(try await Self.invalidOrMissing(connection).isEmpty)
            try await connection.query("DROP INDEX grants_user_granted_at", logger: TestDatabases.quietLogger)
        }
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { _ in }
        try await server.withConnection(to: database) { (connection: PostgresConnection) async throws in
            #expect(try await Self.invalidOrMissing(connection).isEmpty, "a missing one is built too")
        }
    }

    @Test func aSchemaNewerThanThisVersionCanRunAgainstIsRefusedByName() async throws {
        let server = try PostgresTestServer.current()
        let url = try await TestDatabases.freshLedgerURL(.postgres)
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { _ in }
        let database = String(url.split(separator: "/").last ?? "")
        _ = try await server.withConnection(to: database) { (connection: PostgresConnection) async throws in
            try await connection.query(
                "INSERT INTO iap_schema_migrations VALUES ('900_future_additive', 0, false)",
                logger: TestDatabases.quietLogger)
        }
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { _ in }
        _ = try await server.withConnection(to: database) { (connection: PostgresConnection) async throws in
            try await connection.query(
                "INSERT INTO iap_schema_migrations VALUES ('901_future_breaking', 0, true)",
                logger: TestDatabases.quietLogger)
        }
        await #expect {
            try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { _ in }
        } throws: { error in
            "\(error)".contains("901_future_breaking") && (error as? LedgerError)?.code == .migration
        }
    }
}

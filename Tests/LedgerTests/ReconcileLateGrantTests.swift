import Foundation
import Fulfilment
import IAPTestSupport
import PostgresNIO
import Testing

@testable import Ledger

/// Grants that become visible to the reconciler's scan late, on a shared PostgreSQL ledger: stamped by a worker
/// whose clock runs behind, committed long after their stamp, or after the scan's mark was written by a clock that
/// has since stepped back. Each one's user must still become due.
@Suite("Late grants and the reconciler's users on PostgreSQL", .timeLimit(.minutes(2)))
struct ReconcileLateGrantTests {
    static let logger = TestDatabases.quietLogger

    /// Runs `body` with a fresh, migrated PostgreSQL ledger and a plain connection of the test's own to it (another
    /// instance, writing as it likes).
    static func withLedger(
        _ body: @Sendable (any SQLLedgerStore, PostgresConnection) async throws -> Void
    ) async throws {
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        try await LedgerStores.withStore(url: server.url(database: database), logger: logger) { store in
            try await server.withConnection(to: database) { connection in try await body(store, connection) }
        }
    }

    /// A grant written as an instance of this version or an older one writes it (no scan column named).
    static func insertGrant(_ connection: PostgresConnection, _ seq: String, user: String, at date: Date) async throws {
        try await connection.query(
            """
            INSERT INTO grants (payment_seq, user_id, gamebase_product_id, purchase_token, is_test_purchase, state,
                granted_at_ms)
            VALUES (\(seq), \(user), 'gems', \("tok-\(seq)"), false, 'granted', \(date.epochMilliseconds))
            """, logger: logger)
    }

    static func users(_ store: any SQLLedgerStore, since: Date) async throws -> Set<String> {
        Set(try await store.reconciliationUsers(activeSince: since, dueAt: Date(), limit: 10_000))
    }

    @Test func aGrantStampedByAClockBehindAfterAScanMakesItsUserDue() async throws {
        try await Self.withLedger { store, connection in
            let since = Date().addingTimeInterval(-72 * 3_600)
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            // Written after that scan by an instance whose clock runs 10 minutes behind the database's.
            let behind = Date().addingTimeInterval(-600)
            try await Self.insertGrant(connection, "late", user: "late", at: behind)
            #expect(
                try await store.insertRejection(
                    ReconciliationLedgerTests.rejection("late-r", user: "late-sub", reason: .notConsumable, at: behind),
                    event: LedgerStoreTests.event("late-r:consume-failed", seq: "late-r")))
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            #expect(try await Self.users(store, since: since) == ["late", "late-sub"])
        }
    }

    @Test func aGrantCommittedWhileAScanRanMakesItsUserDueAtTheNextOne() async throws {
        try await Self.withLedger { store, connection in
            let since = Date().addingTimeInterval(-72 * 3_600)
            try await Self.insertGrant(connection, "early", user: "early", at: Date().addingTimeInterval(-30))
            // Another instance's transaction, stamped 3 minutes ago (slow to commit), open while a scan runs.
            try await connection.query("BEGIN", logger: Self.logger)
            try await Self.insertGrant(connection, "slow", user: "slow", at: Date().addingTimeInterval(-180))
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            #expect(try await Self.users(store, since: since) == ["early"])
            try await connection.query("COMMIT", logger: Self.logger)
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            #expect(try await Self.users(store, since: since) == ["early", "slow"])
        }
    }

    @Test func aMarkAheadOfTheDatabaseIsNotTrusted() async throws {
        try await Self.withLedger { store, connection in
            let since = Date().addingTimeInterval(-72 * 3_600)
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            // Every mark an hour's worth ahead: a time written before the clock stepped back an hour, a transaction
            // position of the cluster the ledger was copied from (pg_dump, restored into a younger one).
            try await connection.query(
                "UPDATE ledger_marks SET value_ms = value_ms + 3600000 WHERE name LIKE 'reconcile_scan%'",
                logger: Self.logger)
            try await Self.insertGrant(connection, "now", user: "u-now", at: Date().addingTimeInterval(-60))
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            #expect(try await Self.users(store, since: since) == ["u-now"])
            // And from there on, as usual.
            try await Self.insertGrant(connection, "next", user: "u-next", at: Date())
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            #expect(try await Self.users(store, since: since) == ["u-now", "u-next"])
        }
    }

    @Test func moreGrantsInOneTransactionThanAScanChunkAreAllSeen() async throws {
        try await Self.withLedger { store, connection in
            let since = Date().addingTimeInterval(-72 * 3_600)
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            let count = ReconcileScan.chunkRows + 1_001
            // One statement, one transaction: every row has the same transaction id, each its own millisecond.
            let start = Date().addingTimeInterval(-60).epochMilliseconds
            try await connection.query(
                """
                INSERT INTO grants (payment_seq, user_id, gamebase_product_id, purchase_token, is_test_purchase, state,
                    granted_at_ms)
                SELECT 'one' || i, 'one-user-' || i, 'gems', 'tok' || i, false, 'granted', \(start) + i
                FROM generate_series(1, \(count)) AS i
                """, logger: Self.logger)
            // Caught up in a refresh or two (each has a time budget; a loaded machine may need the second), never
            // stuck on that transaction.
            var caughtUp = false
            for _ in 0..<3 where !caughtUp {
                caughtUp = try await store.refreshReconciliationUsers(activeSince: since)
            }
            #expect(caughtUp)
            #expect(try await Self.users(store, since: since).count == count)
        }
    }

    /// A ledger of the version before this one's scan (migrations up to `004_retention`) whose last scan missed a
    /// grant committed late: the upgraded instance reads the window's grants written before it once, from the start
    /// of the window, whatever that scan's mark says.
    @Test func grantsWrittenBeforeTheUpgradeAreReadFromTheStartOfTheWindow() async throws {
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        let now = Date()
        try await server.withConnection(to: database) { connection in
            try await TestDatabases.applyMigrations(first: 4, on: connection)
            try await Self.insertGrant(connection, "missed", user: "u-missed", at: now.addingTimeInterval(-3_600))
            try await Self.insertGrant(connection, "old", user: "u-old", at: now.addingTimeInterval(-100 * 3_600))
            let markMs = now.addingTimeInterval(-120).epochMilliseconds
            try await connection.query(
                """
                INSERT INTO ledger_marks (name, value_ms)
                VALUES ('reconcile_scan_grants', \(markMs)), ('reconcile_scan_rejections', \(markMs))
                """, logger: Self.logger)
        }
        try await LedgerStores.withStore(url: server.url(database: database), logger: Self.logger) { store in
            let since = now.addingTimeInterval(-72 * 3_600)
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            #expect(try await Self.users(store, since: since) == ["u-missed"])
            try await server.withConnection(to: database) { connection in
                try await Self.insertGrant(connection, "after", user: "u-after", at: Date().addingTimeInterval(-600))
            }
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            #expect(try await Self.users(store, since: since) == ["u-missed", "u-after"])
        }
    }
}

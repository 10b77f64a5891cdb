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

    /// The id of the transaction `connection` is in (given one if it had none).
    static func currentTransaction(_ connection: PostgresConnection) async throws -> Int64 {
        var xid: Int64 = 0
        for try await value in try await connection.query(
            "SELECT pg_current_xact_id()::text::bigint", logger: logger
        ).decode(Int64.self) {
            xid = value
        }
        return xid
    }

    /// The scan's stored position in the grants.
    static func grantsPosition(_ connection: PostgresConnection) async throws -> (next: Int64, pending: [Int64]) {
        var position: (next: Int64, pending: [Int64]) = (0, [])
        for try await row in try await connection.query(
            """
            SELECT value_ms, COALESCE(pending_xids, '{}') FROM ledger_marks WHERE name = 'reconcile_scan_grants_xid'
            """, logger: logger
        ).decode((Int64, [Int64]).self) {
            position = row
        }
        return position
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

    /// A transaction still running when the scan passes its id, committed only after several later refreshes (each
    /// moving the position past newer grants): it stays pending in the position, and its user is due once it commits.
    @Test func aTransactionRunningWhenTheScanPassedItMakesItsUserDueWhenItCommitsRefreshesLater() async throws {
        try await Self.withLedger { store, connection in
            let since = Date().addingTimeInterval(-72 * 3_600)
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            try await connection.query("BEGIN", logger: Self.logger)
            try await Self.insertGrant(connection, "slow", user: "slow", at: Date().addingTimeInterval(-180))
            let slow = try await Self.currentTransaction(connection)
            var users: Set<String> = []
            for i in 0..<3 {
                // Other instances' grants, committed after it began.
                #expect(
                    try await store.insertGrant(
                        LedgerStoreTests.grant("g\(i)", user: "u\(i)"),
                        event: LedgerStoreTests.event("g\(i):item-granted", seq: "g\(i)")) == .inserted)
                users.insert("u\(i)")
                #expect(try await store.refreshReconciliationUsers(activeSince: since))
                #expect(try await Self.users(store, since: since) == users)
                let position = try await Self.grantsPosition(connection)
                #expect(position.next > slow, "the scan moves past a transaction still running")
                #expect(position.pending.contains(slow))
            }
            try await connection.query("COMMIT", logger: Self.logger)
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            #expect(try await Self.users(store, since: since) == users.union(["slow"]))
            #expect(try await !Self.grantsPosition(connection).pending.contains(slow))
        }
    }

    /// A write transaction left open anywhere in the cluster (here another database; as well a session idle in
    /// transaction, an orphaned prepared transaction) is running in every snapshot: the scan keeps it pending and
    /// moves on, instead of keeping its position below it and reading everything written since at every refresh.
    @Test func aTransactionLeftOpenElsewhereDoesNotHoldTheScanBack() async throws {
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        let other = try await server.createDatabase()
        let since = Date().addingTimeInterval(-72 * 3_600)
        try await LedgerStores.withStore(url: server.url(database: database), logger: Self.logger) { store in
            try await server.withConnection(to: other) { open in
                try await open.query("BEGIN", logger: Self.logger)
                let pinned = try await Self.currentTransaction(open)
                try await server.withConnection(to: database) { connection in
                    for i in 0..<20 {
                        try await Self.insertGrant(
                            connection, "g\(i)", user: "u\(i)", at: Date().addingTimeInterval(-60))
                    }
                    #expect(try await store.refreshReconciliationUsers(activeSince: since))
                    #expect(try await store.refreshReconciliationUsers(activeSince: since))
                    #expect(try await Self.users(store, since: since).count == 20)
                    let position = try await Self.grantsPosition(connection)
                    #expect(position.next > pinned, "the scan's position is held at a transaction in another database")
                    #expect(position.pending.contains(pinned))
                }
                try await open.query("ROLLBACK", logger: Self.logger)
            }
        }
    }

    /// Never more pending transactions stored than the limit: past it the stored position moves back to the first one
    /// not kept, so what the others wrote is read again by the scan from there.
    @Test func pendingTransactionsPastTheLimitMoveTheStoredPositionBack() {
        let snapshot = TransactionSnapshot(xmax: 100, running: [12, 40, 55, 70, 99])
        let scan = TransactionScan(next: 30, pending: [5, 12]).passing(to: 80, snapshot)
        #expect(scan == TransactionScan(next: 80, pending: [12, 40, 55, 70]))
        #expect(TransactionScan(next: 30, pending: [5, 12]).ended(by: snapshot) == [5])
        #expect(scan.bounded(4) == scan)
        #expect(scan.bounded(2) == TransactionScan(next: 55, pending: [12, 40]))
        #expect(scan.bounded(0) == TransactionScan(next: 12, pending: []))
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

    /// An instance whose clock is ahead refreshes with a window that starts after every row: the scan by transaction
    /// must still read what it passes, or the rows' users are never due for anyone.
    @Test func aRefreshWithAWindowFromAClockAheadPassesNoRowUnread() async throws {
        try await Self.withLedger { store, connection in
            let since = Date().addingTimeInterval(-72 * 3_600)
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            try await Self.insertGrant(connection, "victim", user: "victim", at: Date())
            // The instance 73 hours ahead: its window starts after the grant.
            #expect(try await store.refreshReconciliationUsers(activeSince: Date().addingTimeInterval(3_600)))
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            #expect(try await Self.users(store, since: since) == ["victim"])
        }
    }

    /// A ledger restored into a younger cluster keeps its rows' transaction ids, above every id the new cluster has
    /// given: the window is read again (by time), not left to a scan by transaction that would reach them only when
    /// the new cluster's ids do.
    @Test func aLedgerRestoredIntoAYoungerClusterReadsItsWindowAgain() async throws {
        try await Self.withLedger { store, connection in
            let since = Date().addingTimeInterval(-72 * 3_600)
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            // A grant of the old cluster, written after its last refresh there, and that cluster's marks.
            try await Self.insertGrant(connection, "restored", user: "restored", at: Date().addingTimeInterval(-600))
            try await connection.query(
                """
                UPDATE grants SET scan_xid = (pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 1000000000)::text::xid8
                WHERE payment_seq = 'restored'
                """, logger: Self.logger)
            try await connection.query(
                """
                UPDATE ledger_marks SET value_ms = pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 999999000
                WHERE name LIKE 'reconcile_scan_%_xid'
                """, logger: Self.logger)
            var caughtUp = false
            for _ in 0..<3 where !caughtUp {
                caughtUp = try await store.refreshReconciliationUsers(activeSince: since)
            }
            #expect(caughtUp)
            #expect(try await Self.users(store, since: since) == ["restored"])
            // And new grants from there on, by transaction.
            try await Self.insertGrant(connection, "after", user: "after", at: Date())
            for _ in 0..<3 { _ = try await store.refreshReconciliationUsers(activeSince: since) }
            #expect(try await Self.users(store, since: since) == ["restored", "after"])
        }
    }
}

import Foundation
import Fulfilment
import IAPTestSupport
import PostgresNIO
import Testing

@testable import Ledger

/// The reconciler's scan of a busy PostgreSQL ledger: more grants than a refresh reads in its time budget, written
/// while another database's transaction is left open. Slow (300,000 grants), so out of `make check`'s loop.
@Suite("The reconciler's scan of a busy ledger", .timeLimit(.minutes(6)))
struct ReconcileBusyLedgerTests {
    static let logger = TestDatabases.quietLogger

    /// While a transaction is left open, more grants written than one refresh reads in its budget are all read over
    /// the next refreshes, the newest included: each goes on from where the last got to. (A position held below the
    /// open transaction made every refresh start again there, and the newest grants were never reached.) How many
    /// refreshes that takes depends on the machine's speed — a refresh's budget is wall-clock time — so the bound is
    /// generous; the scan that started again each time never caught up, however many.
    @Test func grantsBeyondARefreshsBudgetAreReachedWhileATransactionIsLeftOpen() async throws {
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        let other = try await server.createDatabase()
        let since = Date().addingTimeInterval(-72 * 3_600)
        let rows = 300_000
        try await LedgerStores.withStore(url: server.url(database: database), logger: Self.logger) { store in
            #expect(try await store.refreshReconciliationUsers(activeSince: since))
            try await server.withConnection(to: other) { open in
                try await open.query("BEGIN", logger: Self.logger)
                try await open.query("SELECT pg_current_xact_id()", logger: Self.logger)
                try await server.withConnection(to: database) { connection in
                    let start = Date().addingTimeInterval(-600).epochMilliseconds
                    // A busy ledger: many transactions of 1,000 grants (four per user), then the newest alone.
                    for batch in stride(from: 0, to: rows, by: 1_000) {
                        try await connection.query(
                            """
                            INSERT INTO grants (payment_seq, user_id, gamebase_product_id, purchase_token,
                                is_test_purchase, state, granted_at_ms)
                            SELECT 'b' || i, 'bu-' || (i / 4), 'gems', 'tok' || i, false, 'consumed', \(start) + i / 1000
                            FROM generate_series(\(batch), \(batch + 999)) AS i
                            """, logger: Self.logger)
                    }
                    let now = Date().epochMilliseconds
                    try await connection.query(
                        """
                        INSERT INTO grants (payment_seq, user_id, gamebase_product_id, purchase_token,
                            is_test_purchase, state, granted_at_ms)
                        VALUES ('newest', 'u-newest', 'gems', 'tok-newest', false, 'granted', \(now))
                        """, logger: Self.logger)
                    var refreshes = 0
                    var caughtUp = false
                    while !caughtUp, refreshes < 100 {
                        caughtUp = try await store.refreshReconciliationUsers(activeSince: since)
                        refreshes += 1
                    }
                    #expect(caughtUp, "every refresh starts again below the open transaction (\(refreshes) refreshes)")
                    let due = Set(
                        try await store.reconciliationUsers(activeSince: since, dueAt: Date(), limit: 1_000_000))
                    #expect(due.contains("u-newest"), "a grant committed before the refreshes is out of their reach")
                    #expect(due.count == rows / 4 + 1)
                }
                try await open.query("ROLLBACK", logger: Self.logger)
            }
        }
    }
}

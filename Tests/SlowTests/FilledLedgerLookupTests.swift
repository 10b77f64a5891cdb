import Foundation
import Fulfilment
import GRDB
import IAPTestSupport
import Ledger
import Lookup
import PostgresNIO
import Testing

/// A support agent's lookups stay index lookups on a ledger of a million purchases: the query plans name the
/// indexes of the filled table (a sequential scan fails the test); the times are printed for docs/benchmarks.md, not asserted.
@Suite("Lookups on a filled ledger", .timeLimit(.minutes(10)))
struct FilledLedgerLookupTests {
    static let purchases = 1_000_000
    static let users = 250_000

    // Fills the tables with SQL and reads the databases' query plans.
    @Test(arguments: LedgerBackend.sql)
    func lookupsByPaymentIdAndByUserUseIndexesOnAMillionPurchases(backend: LedgerBackend) async throws {
        let url = try await TestDatabases.freshLedgerURL(backend)
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { _ in }
        let fill = """
            INSERT INTO grants (payment_seq, user_id, gamebase_product_id, purchase_token, payment_id, is_test_purchase,
                state, granted_at_ms, consume_attempts)
            SELECT 'fill' || i, 'user' || (i % \(Self.users)), 'gems', 'tok' || i, 'GPA.fill' || i, \(backend == .sqlite ? "0" : "false"),
                'consumed', 1600000000000 + i, 1
            """
        let plans: [String]
        switch backend {
        case .memory:
            throw TestSetupError(message: "a memory ledger has no query plans")  // not reached: it has no URL either
        case .sqlite:
            let path = String(url.dropFirst("sqlite://".count))
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in
                try db.execute(
                    sql:
                        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(Self.purchases)) \(fill) FROM n"
                )
                try db.execute(sql: "ANALYZE")
            }
            plans = try await queue.read { db in
                try [
                    "SELECT payment_seq FROM grants WHERE payment_id = 'GPA.fill777'",
                    "SELECT payment_seq, granted_at_ms FROM grants WHERE user_id = 'user42' AND granted_at_ms < 9000000000000 ORDER BY granted_at_ms DESC LIMIT 20",
                ].map { sql in
                    try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN \(sql)").map { $0["detail"] as String }.joined(
                        separator: "; ")
                }
            }
            try queue.close()
        case .postgres:
            let server = try PostgresTestServer.current()
            let database = String(url.split(separator: "/").last?.split(separator: "?").first ?? "")
            plans = try await server.withConnection(to: database) { connection in
                try await connection.query(
                    PostgresQuery(unsafeSQL: "\(fill) FROM generate_series(1, \(Self.purchases)) AS i"),
                    logger: TestDatabases.quietLogger)
                try await connection.query("ANALYZE", logger: TestDatabases.quietLogger)
                var plans: [String] = []
                for sql in [
                    "SELECT payment_seq FROM grants WHERE payment_id = 'GPA.fill777'",
                    "SELECT payment_seq, granted_at_ms FROM grants WHERE user_id = 'user42' AND granted_at_ms < 9000000000000 ORDER BY granted_at_ms DESC LIMIT 20",
                ] {
                    var lines: [String] = []
                    for try await line in try await connection.query(
                        PostgresQuery(unsafeSQL: "EXPLAIN \(sql)"), logger: TestDatabases.quietLogger
                    )
                    .decode(String.self) {
                        lines.append(line)
                    }
                    plans.append(lines.joined(separator: "; "))
                }
                return plans
            }
        }
        for plan in plans {
            #expect(
                !plan.contains("Seq Scan") && !plan.contains("SCAN grants") && !plan.contains("SCAN rejections"),
                "\(plan)")
            #expect(plan.lowercased().contains("index"), "\(plan)")
        }

        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger, migrate: false) { store in
            let reader = store.roles.history
            let finder = PurchaseFinder(reader: reader)
            // Warm once, then time: what a support agent's second lookup costs.
            _ = try await finder.find("GPA.fill777777")
            let clock = ContinuousClock()
            var byPaymentId: FindResult?
            let paymentIdTime = try await clock.measure { byPaymentId = try await finder.find("GPA.fill777777") }
            var byUser: FindResult?
            let userTime = try await clock.measure { byUser = try await finder.find("user4242", as: .userId) }
            var bySeq: FindResult?
            let seqTime = try await clock.measure { bySeq = try await finder.find("fill123456") }
            #expect(byPaymentId?.kind == .paymentId)
            #expect(byPaymentId?.purchases.map(\.paymentSeq) == ["fill777777"])
            #expect(byUser?.purchases.count == Self.purchases / Self.users)
            #expect(bySeq?.kind == .paymentSeq)
            print(
                "filled \(backend.rawValue) ledger of \(Self.purchases) purchases: find by payment id \(paymentIdTime), "
                    + "by userId (4 purchases) \(userTime), by paymentSeq \(seqTime)")
        }
    }
}

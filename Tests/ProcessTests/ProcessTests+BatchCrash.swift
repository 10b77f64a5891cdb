import Foundation
import GRDB
import IAPTestSupport
import Ledger
import PostgresNIO
import Testing

@testable import SystemTestSupport

extension ProcessTests {
    /// The worker writes the grants of many purchases in one transaction (one statement on PostgreSQL). Killed while
    /// such a write is under way, it must leave a ledger in which each grant either committed with its outbox event
    /// or not at all, and the redelivered messages must finish every purchase once.
    @Test(.tags(.librdkafka), arguments: [LedgerBackend.sqlite, .postgres])
    func killedInTheMiddleOfABatchWriteNothingIsLostOrGrantedTwice(_ backend: LedgerBackend) async throws {
        let cluster = try await Cluster.start(purchases: 500, simulatorArguments: ["--latency-ms", "5"])
        let ledgerURL = try await TestDatabases.freshLedgerURL(backend)
        try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) { _ in }
        let writes = try SlowGrantWrites(ledgerURL: ledgerURL)
        try await writes.install()
        let environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "batch-kill-\(UUID().uuidString.prefix(6))", maxInFlight: 256)
        try await cluster.producePurchases()

        var batchesCut = 0
        for round in 0..<3 {
            let worker = try cluster.worker("worker-\(round)", environment)
            // A write of several grants under way, not yet committed: then the kill.
            let deadline = Date().addingTimeInterval(60)
            var probe = try await writes.probe()
            while !probe.isBatchUnderWay, worker.isRunning, Date() < deadline {
                try await Task.sleep(for: .milliseconds(5))
                probe = try await writes.probe()
            }
            #expect(probe.isBatchUnderWay, "round \(round): no batch write was seen under way within 60 s")
            #expect(worker.isRunning, "round \(round): the worker exited:\n\(worker.diagnosticOutput)")
            worker.kill9()
            let after = try await writes.settled()
            if probe.isBatchUnderWay { batchesCut += 1 }
            if let uncommitted = probe.uncommittedRows {
                // One statement: PostgreSQL finishes it for a dead client (or not at all), never a part of it.
                let committed = after - probe.committedGrants
                #expect(
                    committed == 0 || committed >= uncommitted,
                    "round \(round): \(committed) of a batch of at least \(uncommitted) grants committed")
            }
        }
        #expect(batchesCut == 3)

        try await writes.remove()
        let last = try cluster.worker("worker-final", environment)
        try await cluster.waitUntilAllConsumed(within: 300, workers: [last], ledgerURL: ledgerURL)
        #expect(try await last.terminate() == 0)
        try await cluster.expectInvariants(ledgerURL: ledgerURL)
    }
}

/// Makes each grant row the worker inserts cost tens of milliseconds (a trigger the test adds to the worker's
/// ledger), so that a batch of grants is a write that lasts long enough to be killed in, and tells when one is
/// under way.
struct SlowGrantWrites {
    enum Store {
        /// One connection of the test's own for every probe (a write lock it takes at once or not at all).
        case sqlite(DatabaseQueue)
        case postgres(server: PostgresTestServer, database: String)
    }

    /// What the test sees of the worker's writes at one moment.
    struct Probe {
        var committedGrants: Int
        /// A write transaction of the worker's holds the ledger (SQLite: its write lock is taken).
        var writing: Bool
        /// PostgreSQL: grant rows inserted by the statement under way and not committed (a sequence the trigger
        /// advances, which no rollback undoes, minus the committed rows and those of earlier killed statements).
        var uncommittedRows: Int?

        var isBatchUnderWay: Bool { writing && (uncommittedRows.map { $0 >= 3 } ?? true) }
    }

    let store: Store
    /// Grant rows inserted by statements that never committed (PostgreSQL).
    private let abandoned = Shared(0)

    init(ledgerURL: String) throws {
        switch try LedgerURL(ledgerURL) {
        case .sqlite(let path):
            var configuration = Configuration()
            configuration.busyMode = .immediateError
            store = .sqlite(try DatabaseQueue(path: path, configuration: configuration))
        case .postgres:
            let url = try #require(URL(string: ledgerURL))
            store = .postgres(server: try PostgresTestServer(url: ledgerURL), database: String(url.path.dropFirst()))
        }
    }

    func install() async throws {
        switch store {
        case .sqlite:
            try sqlite { db in
                try db.execute(
                    sql: """
                        CREATE TABLE iap_test_filler (x INTEGER);
                        WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 1000)
                        INSERT INTO iap_test_filler SELECT x FROM n;
                        CREATE TRIGGER iap_test_slow_grant AFTER INSERT ON grants BEGIN
                            SELECT count(*) FROM iap_test_filler a, iap_test_filler b WHERE a.x + b.x = length(NEW.payment_seq) + 1000;
                        END;
                        """)
            }
        case .postgres:
            try await postgres { connection in
                for statement in [
                    "CREATE SEQUENCE iap_test_grant_rows",
                    """
                    CREATE FUNCTION iap_test_slow_grant() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN PERFORM nextval('iap_test_grant_rows'); PERFORM pg_sleep(0.02); RETURN NEW; END $$
                    """,
                    """
                    CREATE TRIGGER iap_test_slow_grant AFTER INSERT ON grants
                    FOR EACH ROW EXECUTE FUNCTION iap_test_slow_grant()
                    """,
                ] {
                    _ = try await connection.query(
                        PostgresQuery(unsafeSQL: statement), logger: TestDatabases.quietLogger)
                }
            }
        }
    }

    func remove() async throws {
        switch store {
        case .sqlite:
            try sqlite { db in try db.execute(sql: "DROP TRIGGER iap_test_slow_grant") }
        case .postgres:
            try await postgres { connection in
                _ = try await connection.query(
                    "DROP TRIGGER iap_test_slow_grant ON grants", logger: TestDatabases.quietLogger)
            }
        }
    }

    func probe() async throws -> Probe {
        switch store {
        case .sqlite:
            return try sqlite { db in
                let committed = try Int.fetchOne(db, sql: "SELECT count(*) FROM grants") ?? 0
                do {
                    try db.execute(sql: "BEGIN IMMEDIATE")
                    try db.execute(sql: "ROLLBACK")
                    return Probe(committedGrants: committed, writing: false)
                } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
                    return Probe(committedGrants: committed, writing: true)
                }
            }
        case .postgres:
            return try await postgres { connection in
                let rows = try await connection.query(
                    """
                    SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM iap_test_grant_rows),
                           (SELECT count(*) FROM grants),
                           (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                                AND pid <> pg_backend_pid() AND state = 'active' AND query LIKE '%INSERT INTO grants%')
                    """, logger: TestDatabases.quietLogger)
                for try await (inserted, committed, active) in rows.decode((Int64, Int64, Int64).self) {
                    let uncommitted = Int(inserted - committed) - abandoned.value
                    return Probe(committedGrants: Int(committed), writing: active > 0, uncommittedRows: uncommitted)
                }
                throw ProcessTestError("the probe query returned no row")
            }
        }
    }

    /// The committed grants once the killed worker's write has ended: at once on SQLite (the lock died with the
    /// process); on PostgreSQL when every backend of the dead worker has gone, so that whatever the server finished
    /// for it (a statement, or a transaction whose COMMIT was already sent) is committed and the rest rolled back.
    /// Then every grant row inserted and not committed was abandoned: counted from the totals, not added up probe by
    /// probe, since a probe taken while a dead client's transaction commits sees its rows in the sequence and not yet
    /// in the table.
    func settled() async throws -> Int {
        switch store {
        case .sqlite:
            return try await probe().committedGrants
        case .postgres:
            let deadline = Date().addingTimeInterval(30)
            while try await otherBackends() > 0 {
                guard Date() < deadline else {
                    throw ProcessTestError("the dead worker's backends are still connected after 30 s")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            let (inserted, committed) = try await postgres { connection in
                let rows = try await connection.query(
                    """
                    SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM iap_test_grant_rows),
                           (SELECT count(*) FROM grants)
                    """, logger: TestDatabases.quietLogger)
                for try await row in rows.decode((Int64, Int64).self) { return row }
                throw ProcessTestError("the totals query returned no row")
            }
            abandoned.withLock { $0 = Int(inserted - committed) }
            return Int(committed)
        }
    }

    /// The ledger database's backends other than the test's own: the worker's, alive or not yet gone.
    private func otherBackends() async throws -> Int64 {
        try await postgres { connection in
            let rows = try await connection.query(
                """
                SELECT count(*) FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
                """, logger: TestDatabases.quietLogger)
            for try await count in rows.decode(Int64.self) { return count }
            throw ProcessTestError("the backends query returned no row")
        }
    }

    private func sqlite<T>(_ body: (Database) throws -> T) throws -> T {
        guard case .sqlite(let queue) = store else { throw ProcessTestError("not a SQLite ledger") }
        return try queue.inDatabase(body)
    }

    private func postgres<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        guard case .postgres(let server, let database) = store else {
            throw ProcessTestError("not a PostgreSQL ledger")
        }
        return try await server.withConnection(to: database, body)
    }
}

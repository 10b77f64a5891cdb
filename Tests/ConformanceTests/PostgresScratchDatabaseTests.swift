import Foundation
import Fulfilment
import IAPTestSupport
import Ledger
import PostgresNIO
import Testing

/// The mixed bench's database per run: created empty, a ledger in it, dropped after — also when the run fails — and
/// a name that could be SQL refused before the server is asked.
@Suite("PostgreSQL: a scratch database per benchmark run", .timeLimit(.minutes(1)))
struct PostgresScratchDatabaseTests {
    static func exists(_ name: String) async throws -> Bool {
        try await PostgresTestServer.current().withConnection(to: "postgres") { connection in
            let rows = try await connection.query(
                "SELECT count(*) FROM pg_database WHERE datname = \(name)", logger: TestDatabases.quietLogger)
            for try await count in rows.decode(Int64.self) { return count == 1 }
            return false
        }
    }

    @Test func theDatabaseHoldsALedgerDuringTheRunAndIsGoneAfter() async throws {
        let url = try PostgresLedgerURL(try TestDatabases.postgresURL())
        let name = "iap_scratch_\(UUID().uuidString.prefix(8).lowercased())"
        let consumed = try await PostgresLedgerStore.withScratchDatabase(
            named: name, on: url, logger: TestDatabases.quietLogger
        ) { scratch in
            #expect(scratch.database == name)
            #expect(try await Self.exists(name))
            return try await LedgerStores.withStore(
                url: PostgresTestServer.current().url(database: name), logger: TestDatabases.quietLogger
            ) {
                try await $0.stats().consumed
            }
        }
        #expect(consumed == 0, "a new database holds an empty ledger")
        #expect(try await !Self.exists(name))
    }

    @Test func aRunThatFailsStillDropsItsDatabase() async throws {
        let url = try PostgresLedgerURL(try TestDatabases.postgresURL())
        let name = "iap_scratch_\(UUID().uuidString.prefix(8).lowercased())"
        struct RunFailed: Error {}
        await #expect(throws: RunFailed.self) {
            try await PostgresLedgerStore.withScratchDatabase(named: name, on: url, logger: TestDatabases.quietLogger) {
                _ in throw RunFailed()
            }
        }
        #expect(try await !Self.exists(name))
    }

    @Test(arguments: [
        "", "x; DROP DATABASE iap_test", "Upper", "name-with-dash", "1st", String(repeating: "a", count: 64), "é",
    ])
    func aNameThatIsNotAPlainIdentifierIsRefusedBeforeTheServerIsAsked(_ name: String) async throws {
        let url = try PostgresLedgerURL(try TestDatabases.postgresURL())
        let error = await #expect(throws: LedgerError.self) {
            try await PostgresLedgerStore.withScratchDatabase(named: name, on: url, logger: TestDatabases.quietLogger) {
                _ in ()
            }
        }
        #expect(error?.code == .configuration)
    }
}

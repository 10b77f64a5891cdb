import Foundation
import Fulfilment
import IAPTestSupport
import Ledger
import PostgresNIO
import Testing

/// `iap-dev bench scale` fills only a database that holds no table: what it asks the store before anything migrates.
@Suite("A ledger that holds tables is never taken for a fresh one", .timeLimit(.minutes(2)))
struct LedgerFillRefusalTests {
    @Test(arguments: LedgerBackend.sql)
    func aFreshDatabaseHoldsNoTablesAndAMigratedOneDoes(backend: LedgerBackend) async throws {
        let url = try await TestDatabases.freshLedgerURL(backend)
        let logger = TestDatabases.quietLogger
        #expect(
            try await LedgerStores.withStore(url: url, logger: logger, migrate: false) { try await $0.holdsNoTables() })
        try await LedgerStores.withStore(url: url, logger: logger) { _ in }
        #expect(
            !(try await LedgerStores.withStore(url: url, logger: logger, migrate: false) {
                try await $0.holdsNoTables()
            }))
    }

    /// With PostgreSQL's default search path (`"$user", public`), an empty schema named after the role comes first:
    /// a ledger in `public` must still be seen, or the bench would create its tables in the role's schema, where the
    /// live worker's unqualified statements would then find them instead of its own.
    @Test func aLedgerInPublicIsSeenBehindAnEmptySchemaOfTheRole() async throws {
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        let url = server.url(database: database)
        let logger = TestDatabases.quietLogger
        try await LedgerStores.withStore(url: url, logger: logger) { _ in }
        _ = try await server.createRoleSchema(in: database)
        #expect(
            !(try await LedgerStores.withStore(url: url, logger: logger, migrate: false) {
                try await $0.holdsNoTables()
            }))
    }
}

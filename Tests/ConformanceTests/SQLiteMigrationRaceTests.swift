import Foundation
import Fulfilment
import IAPTestSupport
import Ledger
import Testing

/// A worker starting while `find`, `ledger stats` or another process opens the same new SQLite ledger: each migrates
/// it, and they must not both run the same migration (the second failed "duplicate column name" and the worker did not
/// start). Found by the Apple refund process test, whose checks open the ledger while its first worker starts.
@Suite("SQLite ledgers migrated by two openers at once", .timeLimit(.minutes(2)))
struct SQLiteMigrationRaceTests {
    @Test func twoStoresMigratingOneNewFileAtOnceBothSucceed() async throws {
        for round in 0..<20 {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("iap-race-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let path = folder.appendingPathComponent("ledger.sqlite").path
            let stores = try (0..<2).map { _ in try SQLiteLedgerStore(path: path, logger: TestDatabases.quietLogger) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for store in stores { group.addTask { try await store.migrate() } }
                try await group.waitForAll()
            }
            for store in stores { #expect(try await store.stats().granted == 0, "round \(round)") }
        }
    }
}

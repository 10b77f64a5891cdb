import Foundation
import Fulfilment
import GRDB
import IAPTestSupport
import Testing

@testable import Ledger

/// Whether a failed write is the storage's (an outage the worker waits out) or the statement's (the purchase's, retried
/// and counted) is decided by the error's kind: each SQLite result code and PostgreSQL SQLSTATE the storage answers
/// with, and a real SQLite file on a file system that fills and gets its space back.
@Suite("The ledger's storage faults", .timeLimit(.minutes(2)))
struct LedgerStorageFaultTests {
    typealias T = LedgerStoreTests

    @Test(arguments: [
        (ResultCode.SQLITE_FULL, "disk full"), (.SQLITE_IOERR, "I/O error"), (.SQLITE_READONLY, "read-only"),
        (.SQLITE_CANTOPEN, "cannot open the file"),
    ])
    func eachSQLiteStorageCodeIsUnwritable(code: ResultCode, condition: String) throws {
        let store = try SQLiteLedgerStore(path: NSTemporaryDirectory() + "classify-\(UUID()).sqlite")
        let error = store.wrap(DatabaseError(resultCode: code, message: "as SQLite says it"))
        #expect(error.code == .unwritable)
        #expect(error.message.hasPrefix("\(condition) (\(store.path))"), "readiness shows the condition first")
    }

    @Test(arguments: [ResultCode.SQLITE_CONSTRAINT, .SQLITE_ERROR, .SQLITE_MISMATCH, .SQLITE_TOOBIG])
    func aStatementsOwnSQLiteFailureIsAQueryError(code: ResultCode) throws {
        let store = try SQLiteLedgerStore(path: NSTemporaryDirectory() + "classify-\(UUID()).sqlite")
        #expect(store.wrap(DatabaseError(resultCode: code, message: "a statement's")).code == .query)
    }

    @Test(arguments: [
        ("53100", "disk full"), ("53200", "out of memory"), ("58030", "I/O error"), ("25006", "read-only"),
    ])
    func eachPostgreSQLStorageStateIsUnwritable(sqlState: String, condition: String) {
        #expect(PostgresLedgerStore.storageCondition(sqlState: sqlState)?.hasPrefix(condition) == true)
    }

    @Test(arguments: ["23505", "40001", "42P01", "57014", "08006", ""])
    func otherPostgreSQLStatesAreNotTheStorages(sqlState: String) {
        #expect(PostgresLedgerStore.storageCondition(sqlState: sqlState) == nil)
    }

    /// A real full disk: the grant fails as `unwritable` (nothing committed), the probe's write fails while a read
    /// answers, and both succeed once space returns.
    @Test(.enabled(if: ScratchFileSystem.isAvailable, "mounting a tmpfs needs root"))
    func aSQLiteLedgerOnAFullFileSystemIsUnwritableUntilSpaceReturns() async throws {
        let disk = try ScratchFileSystem(megabytes: 4)
        defer { disk.unmount() }
        let url = "sqlite://\(disk.path)/ledger.sqlite"
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { store in
            _ = try await store.insertGrants([
                GrantWrite(grant: T.grant("before"), event: T.event("before:item-granted", seq: "before"))
            ])
            try disk.fill()
            var refused: LedgerError?
            for round in 0..<200 where refused == nil {
                do {
                    let seq = "full-\(round)"
                    _ = try await store.insertGrants([
                        GrantWrite(grant: T.grant(seq), event: T.event("\(seq):item-granted", seq: seq))
                    ])
                } catch let error as LedgerError {
                    refused = error
                }
            }
            let error = try #require(refused, "a full file system refuses writes within 200 grants")
            #expect(error.code == .unwritable, "\(error)")
            #expect(error.message.hasPrefix("disk full") || error.message.hasPrefix("I/O error"), "\(error)")
            #expect(try await store.grant(paymentSeq: "before") != nil, "reads still answer")
            await #expect(throws: LedgerError.self) { try await store.probeWrite() }
            try disk.removeFiller()
            try await store.probeWrite()
            _ = try await store.insertGrants([
                GrantWrite(grant: T.grant("after"), event: T.event("after:item-granted", seq: "after"))
            ])
            #expect(try await store.grant(paymentSeq: "after") != nil)
        }
    }

    /// `ledger.min_free_bytes`: below the floor the store says so without a database call, and its probe fails.
    @Test(.enabled(if: ScratchFileSystem.isAvailable, "mounting a tmpfs needs root"))
    func aSQLiteLedgerBelowItsFloorSaysSoAndItsProbeFails() async throws {
        let disk = try ScratchFileSystem(megabytes: 16)
        defer { disk.unmount() }
        let store = try SQLiteLedgerStore(path: disk.path + "/ledger.sqlite", minFreeBytes: 8 << 20)
        try await store.migrate()
        #expect(store.storageShortfall() == nil)
        try await store.probeWrite()
        try disk.fill(leaving: 4 << 20)
        let shortfall = try #require(store.storageShortfall())
        #expect(shortfall.code == .unwritable)
        #expect(shortfall.message.hasPrefix("disk below ledger.min_free_bytes (\(disk.path)/ledger.sqlite)"))
        await #expect(throws: LedgerError.self) { try await store.probeWrite() }
        try disk.removeFiller()
        #expect(store.storageShortfall() == nil)
        try await store.probeWrite()
        try await store.close()
    }
}

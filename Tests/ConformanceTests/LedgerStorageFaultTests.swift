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
        (.SQLITE_CANTOPEN, "cannot open the file"), (.SQLITE_CORRUPT, "corrupt"), (.SQLITE_NOTADB, "corrupt"),
        (.SQLITE_NOMEM, "out of memory"),
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

    /// The ledger's file gone from its path (a volume detached), then another ledger there, then an older copy of
    /// its own, then its own file again: the store waits without creating a file in the empty place, refuses the
    /// other ledger, and opens each copy of itself with every row it had — the rows a copy lacks (commits a failed
    /// volume lost, or all since an older copy) copied from the file it had open.
    @Test func aSQLiteLedgerWhoseFileIsGoneWaitsRefusesOthersAndOpensItsOwnCopiesWhole() async throws {
        let folder = NSTemporaryDirectory() + "reopen-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/ledger.sqlite"
        let store = try SQLiteLedgerStore(path: path)
        try await store.migrate()
        func grant(_ seq: String) async throws {
            _ = try await store.insertGrants([
                GrantWrite(grant: T.grant(seq), event: T.event("\(seq):item-granted", seq: seq))
            ])
        }
        try await grant("kept")
        try await store.pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        let older = folder + "/older.sqlite"
        try FileManager.default.copyItem(atPath: path, toPath: older)
        try await grant("later")

        // Gone: nothing at the path.
        for suffix in ["", "-wal", "-shm"] {
            try FileManager.default.moveItem(atPath: path + suffix, toPath: folder + "/detached\(suffix)")
        }
        #expect(store.storageShortfall()?.message.hasPrefix("cannot open the file (\(path)): it is gone") == true)
        await #expect(throws: LedgerError.self) { try await store.probeWrite() }
        #expect(!FileManager.default.fileExists(atPath: path), "no new, empty ledger is created in its place")

        func place(_ source: String, wal: String? = nil) throws {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            try FileManager.default.copyItem(atPath: source, toPath: path)
            if let wal { try FileManager.default.copyItem(atPath: wal, toPath: path + "-wal") }
        }
        // Another ledger at the path: refused.
        let other = try SQLiteLedgerStore(path: folder + "/other.sqlite")
        try await other.migrate()
        try await other.pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        try place(folder + "/other.sqlite")
        await #expect(throws: LedgerError.self) { try await store.probeWrite() }
        // A copy of this ledger taken before its last grant (as a volume that lost its last commits leaves it):
        // opened, with the grant and its event copied from the file that was open.
        try place(older)
        try await store.probeWrite()
        #expect(store.storageShortfall() == nil)
        #expect(try await store.grant(paymentSeq: "kept") != nil, "the ledger opened again is this one")
        #expect(try await store.grant(paymentSeq: "later") != nil, "with the grant the copy lacked")
        let events = try await store.pool.read { db in
            try String.fetchAll(db, sql: "SELECT id FROM outbox ORDER BY id")
        }
        #expect(events == ["kept:item-granted", "later:item-granted"])
        try await grant("after")

        // The file detached at first, its volume back: it lacks "after", which is copied to it in turn.
        try place(folder + "/detached", wal: folder + "/detached-wal")
        try await store.probeWrite()
        #expect(store.storageShortfall() == nil)
        for seq in ["kept", "later", "after"] {
            #expect(try await store.grant(paymentSeq: seq) != nil, "\(seq) is in the file opened again")
        }
        try await grant("last")
        #expect(try await store.grant(paymentSeq: "last") != nil)
    }

    /// A commit is durable against the machine's crash, not only the process's: the writer syncs the log at each
    /// commit (GRDB's WAL default, NORMAL, lost committed grants when a volume aborted on a disk error).
    @Test func theSQLiteWriterSyncsEachCommit() async throws {
        let store = try SQLiteLedgerStore(path: NSTemporaryDirectory() + "synchronous-\(UUID()).sqlite")
        let level = try await store.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        #expect(level == 2, "FULL")
        try await store.close()
    }

    /// A reader's page cache is bounded to what point lookups need, so memory does not follow the file's growth
    /// on up to five readers; the writer keeps SQLite's default.
    @Test func sqliteReadersKeepASmallPageCacheAndTheWriterTheDefault() async throws {
        let store = try SQLiteLedgerStore(path: NSTemporaryDirectory() + "cache-size-\(UUID()).sqlite")
        let reader = try await store.pool.read { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") }
        let writer = try await store.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") }
        let sqliteDefault = try await DatabaseQueue().read { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") }
        #expect(reader == -512)
        #expect(writer == sqliteDefault)
        #expect(sqliteDefault != -512)
        try await store.close()
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

import Foundation
import GRDB
import GRDBSQLite
import Testing

@testable import Ledger

/// The hot path's statements bind their values through SQLite's C API: what they store must be what GRDB's own
/// binding stores, including the values where a C API is easy to get wrong.
@Suite("SQLite arguments bound in place")
struct SQLiteArgumentTests {
    @Test func textsIntegersBlobsAndNullsAreStoredAsGRDBWouldStoreThem() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (a TEXT, b INTEGER, c BLOB, d TEXT, e TEXT, f BLOB)")
            let long = String(repeating: "é", count: 5_000)
            try db.cachedStatement(sql: "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)").run(
                [.text(""), .integer(Int64.min), .blob([]), .null, .text(long), .blob([0, 1, 2])], in: db)
            let row = try #require(
                try Row.fetchOne(db, sql: "SELECT a, typeof(a) AS ta, b, c, typeof(c) AS tc, d, e, f FROM t"))
            #expect(row["a"] as String? == "", "an empty text is text, not NULL")
            #expect(row["ta"] as String == "text")
            #expect(row["b"] as Int64 == Int64.min)
            #expect(row["tc"] as String == "blob", "an empty blob is a blob, not NULL")
            #expect((row["c"] as Data?) == Data())
            #expect(row["d"] as String? == nil)
            #expect(row["e"] as String == long, "10,000 bytes of two-byte characters, whole")
            #expect(row["f"] as Data == Data([0, 1, 2]))
        }
    }

    @Test func aTextWithANulIsStoredUpToItAsGRDBStoresIt() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (k INTEGER, v TEXT)")
            try db.cachedStatement(sql: "INSERT INTO t VALUES (1, ?)").run([.text("a\u{0}b")], in: db)
            try db.execute(sql: "INSERT INTO t VALUES (2, ?)", arguments: ["a\u{0}b"])
            try db.cachedStatement(sql: "INSERT INTO t VALUES (3, ?)").run([.text("\u{0}b")], in: db)
            let stored = try Row.fetchAll(
                db, sql: "SELECT length(CAST(v AS BLOB)) AS n, typeof(v) AS t FROM t ORDER BY k")
            #expect(stored.map { $0["n"] as Int } == [1, 1, 0], "both bindings keep what comes before the NUL")
            #expect(stored.map { $0["t"] as String } == ["text", "text", "text"])
        }
    }

    @Test func aStatementRunsAgainWithNewValuesAndReadsItsRows() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)")
            for i in 0..<3 {
                try db.cachedStatement(sql: "INSERT INTO t VALUES (?, ?)").run(
                    [.text("k\(i)"), .integer(Int64(i))], in: db)
            }
            var seen: [Int64] = []
            try db.cachedStatement(sql: "SELECT v FROM t WHERE v >= ? ORDER BY v").run([.integer(1)], in: db) {
                seen.append(sqlite3_column_int64($0, 0))
            }
            #expect(seen == [1, 2])
        }
    }

    /// A write whose transaction was rolled back under it (SQLITE_FULL, an I/O error) must not commit on its own,
    /// without the rest of its transaction; a read still runs.
    @Test func aWriteOutsideATransactionIsRefusedAndCommitsNothing() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in try db.execute(sql: "CREATE TABLE t (v TEXT)") }
        try queue.writeWithoutTransaction { db in
            #expect(throws: DatabaseError.self) {
                try db.cachedStatement(sql: "INSERT INTO t VALUES (?)").run([.text("alone")], in: db)
            }
            var count = -1
            try db.cachedStatement(sql: "SELECT count(*) FROM t").run([], in: db) {
                count = Int(sqlite3_column_int64($0, 0))
            }
            #expect(count == 0)
        }
        try queue.write { db in
            try db.cachedStatement(sql: "INSERT INTO t VALUES (?)").run([.text("in a transaction")], in: db)
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM t") == 1)
        }
    }

    @Test func aFailingStepAndAWrongArgumentCountAreErrorsAndTheStatementStaysUsable() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (k TEXT PRIMARY KEY)")
            let insert = try db.cachedStatement(sql: "INSERT INTO t VALUES (?)")
            try insert.run([.text("a")], in: db)
            #expect(throws: DatabaseError.self) { try insert.run([.text("a")], in: db) }
            #expect(throws: DatabaseError.self) { try insert.run([], in: db) }
            #expect(throws: DatabaseError.self) { try insert.run([.text("b"), .text("c")], in: db) }
            try insert.run([.text("b")], in: db)
            #expect(try String.fetchAll(db, sql: "SELECT k FROM t ORDER BY k") == ["a", "b"])
        }
    }
}

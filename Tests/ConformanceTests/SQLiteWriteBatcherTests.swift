import Foundation
import GRDB
import Synchronization
import Testing

@testable import Ledger

/// The SQLite ledger's group commit: writes that wait together share one transaction. A batch whose writes all
/// succeed runs no savepoint (each would have SQLite journal every page its write changes); a write that throws
/// is still undone alone.
@Suite("SQLite group commit")
struct SQLiteWriteBatcherTests {
    /// A pool on a fresh file whose every statement on any connection is recorded, with one table `t`.
    final class Rig: Sendable {
        let folder: URL
        let pool: DatabasePool
        let batcher: SQLiteWriteBatcher
        private let statements = Statements()

        final class Statements: Sendable {
            let lines = Mutex<[String]>([])
        }

        init() throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent("batcher-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            var configuration = Configuration()
            let statements = statements
            configuration.prepareDatabase { db in
                db.trace(options: .statement) { event in statements.lines.withLock { $0.append("\(event)") } }
            }
            pool = try DatabasePool(path: folder.appendingPathComponent("t.sqlite").path, configuration: configuration)
            try pool.write { db in try db.execute(sql: "CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER NOT NULL)") }
            batcher = SQLiteWriteBatcher(pool: pool)
        }

        deinit { try? FileManager.default.removeItem(at: folder) }

        /// The statements run since the last call.
        func takeStatements() -> [String] {
            statements.lines.withLock { taken in
                defer { taken = [] }
                return taken
            }
        }

        /// Runs `bodies` as one batch: the writer is held until all of them wait, so they go into one transaction.
        func batch(_ bodies: [@Sendable (Database) throws -> Int]) async -> [Result<Int, any Error>] {
            let release = DispatchSemaphore(value: 0)
            pool.asyncWriteWithoutTransaction { _ in release.wait() }
            return await withTaskGroup(of: (Int, Result<Int, any Error>).self) { group in
                for (index, body) in bodies.enumerated() {
                    group.addTask {
                        do { return (index, .success(try await self.batcher.write(body))) } catch {
                            return (index, .failure(error))
                        }
                    }
                }
                // Ten seconds at most: a batch that never forms fails the test's checks rather than hanging it.
                let deadline = ContinuousClock.now + .seconds(10)
                while batcher.waitingWrites < bodies.count, ContinuousClock.now < deadline {
                    try? await Task.sleep(for: .milliseconds(2))
                }
                release.signal()
                var results: [Int: Result<Int, any Error>] = [:]
                for await (index, result) in group { results[index] = result }
                return bodies.indices.map { results[$0]! }
            }
        }

        func rows() throws -> [String: Int] {
            try pool.read { db in
                let rows = try Row.fetchAll(db, sql: "SELECT id, n FROM t")
                return Dictionary(uniqueKeysWithValues: rows.map { ($0["id"], $0["n"]) })
            }
        }
    }

    static func insert(_ id: String, _ n: Int) -> @Sendable (Database) throws -> Int {
        { db in
            try db.execute(sql: "INSERT INTO t (id, n) VALUES (?, ?)", arguments: [id, n])
            return n
        }
    }

    @Test func aBatchWhoseWritesSucceedRunsInOneTransactionWithoutSavepoints() async throws {
        let rig = try Rig()
        _ = rig.takeStatements()
        let results = await rig.batch((0..<50).map { Self.insert("r\($0)", $0) })
        #expect(results.map { try? $0.get() } == (0..<50).map { $0 })
        let statements = rig.takeStatements()
        #expect(!statements.contains { $0.uppercased().hasPrefix("SAVEPOINT") }, "\(statements.prefix(8))")
        #expect(Self.count("BEGIN", in: statements) == 1, "one transaction: \(statements.prefix(8))")
        #expect(Self.count("COMMIT", in: statements) == 1)
        #expect(try rig.rows().count == 50)
    }

    static func count(_ keyword: String, in statements: [String]) -> Int {
        statements.filter { $0.uppercased().hasPrefix(keyword) }.count
    }

    /// A write that inserts its own row `id`, then one that breaks the primary key: `existing`, a row written before
    /// it (by an earlier write of the batch, or before the batch).
    static func failing(_ id: String, duplicating existing: String) -> @Sendable (Database) throws -> Int {
        { db in
            try db.execute(sql: "INSERT INTO t (id, n) VALUES (?, 0)", arguments: [id])
            try db.execute(sql: "INSERT INTO t (id, n) VALUES (?, 9)", arguments: [existing])
            return 0
        }
    }

    /// Failing writes first, in the middle (two of them) and last: each one's own row goes, every other write's
    /// stays, and only the failing ones are told of a failure. The batch was rolled back once and run again with a
    /// savepoint per write.
    @Test func writesThatThrowAreUndoneAloneAndTheirNeighboursCommit() async throws {
        let rig = try Rig()
        _ = try await rig.batcher.write(Self.insert("z", 26))
        _ = rig.takeStatements()
        let results = await rig.batch([
            Self.failing("f1", duplicating: "z"),
            Self.insert("a", 1),
            Self.failing("f2", duplicating: "a"),
            Self.insert("c", 3),
            Self.failing("f3", duplicating: "c"),
            Self.insert("d", 4),
            Self.failing("f4", duplicating: "a"),
        ])
        let statements = rig.takeStatements()
        let succeeded: [Int?] = results.map { try? $0.get() }
        #expect(succeeded == [nil, 1, nil, 3, nil, 4, nil])
        for index in [0, 2, 4, 6] {
            guard case .failure(let error) = results[index] else { continue }
            #expect((error as? DatabaseError)?.resultCode == .SQLITE_CONSTRAINT, "write \(index): \(error)")
        }
        #expect(try rig.rows() == ["z": 26, "a": 1, "c": 3, "d": 4], "each failing write's own row went with it")
        #expect(Self.count("BEGIN", in: statements) == 2, "a first run, then a second: \(statements.prefix(12))")
        #expect(
            statements.filter { $0.uppercased() == "ROLLBACK TRANSACTION" }.count == 1,
            "the first run rolled back whole: \(statements.prefix(12))")
        #expect(Self.count("SAVEPOINT", in: statements) == 7, "then a savepoint per write: \(statements.prefix(12))")
        #expect(Self.count("COMMIT", in: statements) == 1)
    }

    /// After some errors (a full disk, an I/O error) SQLite has already rolled the whole transaction back: nothing
    /// of the batch is durable, and every write is told so, the ones before the failure too.
    @Test func aWriteThatEndsTheTransactionFailsTheWholeBatch() async throws {
        struct Gone: Error {}
        let rig = try Rig()
        let results = await rig.batch([
            Self.insert("a", 1),
            { db in
                try db.execute(sql: "INSERT INTO t (id, n) VALUES ('b', 2)")
                try db.execute(sql: "ROLLBACK")
                throw Gone()
            },
            Self.insert("c", 3),
        ])
        for (index, result) in results.enumerated() {
            guard case .failure(let error) = result else {
                Issue.record("write \(index) succeeded in a transaction that was rolled back")
                continue
            }
            #expect(error is Gone, "write \(index): \(error)")
        }
        #expect(try rig.rows().isEmpty)
        // The writer is usable afterwards.
        let next = await rig.batch([Self.insert("d", 4)])
        #expect((try? next[0].get()) == 4)
    }

    /// The second run can meet the storage's failure too: a write that breaks the primary key sends the batch to its
    /// savepoint run, where a later write ends the transaction. Nothing of the batch is durable, and every write is
    /// told so with that failure.
    @Test func aTransactionEndedDuringTheSavepointRunFailsTheWholeBatch() async throws {
        struct Gone: Error {}
        let rig = try Rig()
        _ = try await rig.batcher.write(Self.insert("z", 26))
        let results = await rig.batch([
            Self.insert("a", 1),
            Self.failing("f", duplicating: "z"),
            { db in
                try db.execute(sql: "ROLLBACK")
                throw Gone()
            },
        ])
        for (index, result) in results.enumerated() {
            guard case .failure(let error) = result else {
                Issue.record("write \(index) succeeded in a transaction that was rolled back")
                continue
            }
            #expect(error is Gone, "write \(index): \(error)")
        }
        #expect(try rig.rows() == ["z": 26])
    }
}

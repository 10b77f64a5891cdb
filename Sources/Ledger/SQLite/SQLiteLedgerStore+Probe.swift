import Foundation
import Fulfilment
import GRDB
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The database a ``SQLiteLedgerStore`` has open: its pool, the pool's write batcher, and which file they hold.
struct OpenedFile: Sendable {
    let pool: DatabasePool
    let batcher: SQLiteWriteBatcher
    /// The device and inode of the file when it was opened; `nil` if they could not be read.
    let identity: FileIdentity?

    /// Opens (creating if needed) the database at `path`.
    init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.label = "iap-worker.ledger"
        // Each connection's page cache fills up to its limit as the file outgrows it (2 MiB by default, on a writer
        // and up to five readers), so a worker's memory rose for a quarter of an hour of steady traffic. The readers
        // answer the purchases' point lookups (and the pruner's counts, `find`'s pages), which mostly need the
        // b-trees' upper pages; what a reader's cache no longer holds is read again from the kernel's page cache.
        configuration.prepareDatabase { db in
            if db.configuration.readonly { try db.execute(sql: "PRAGMA cache_size = -\(Self.readerCacheKiB)") }
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        // GRDB sets WAL's `synchronous = NORMAL`: a commit is then durable against the process's crash but not the
        // machine's (power lost, a file system that aborts on a disk error), which rolls back the last commits — grants
        // whose Consume was already called, then re-read as consumed elsewhere. FULL syncs the log at each commit
        // (the group commit shares one sync among the purchases in a batch).
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        batcher = SQLiteWriteBatcher(pool: pool)
        identity = FileIdentity(of: path)
    }

    /// The page cache of each reader connection, in KiB.
    static let readerCacheKiB = 512
}

/// Which file a path leads to: its device and inode.
struct FileIdentity: Equatable, Sendable {
    let device: UInt64
    let inode: UInt64

    /// `nil` when nothing is at `path` (or it cannot be read).
    init?(of path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}

// MARK: The probe (LedgerProbe)

extension SQLiteLedgerStore {
    public func probeWrite() async throws {
        if let shortfall = floorShortfall() { throw shortfall }
        let moved = fileMoved()
        if moved == nil, identityMark.withLock({ $0 }) == nil { await markIdentity() }
        // The path leads to another file than the one open: its volume was repaired and mounted again (the
        // descriptors held on a volume that turned read-only stay read-only for good), or replaced. Open it again if
        // it is this ledger, before writing, so that the write lands where the next start would read.
        if let moved {
            // Off the cooperative pool: opening a file and perhaps copying a whole ledger blocks.
            let reopened = await withCheckedContinuation { continuation in
                DispatchQueue.global().async { continuation.resume(returning: self.reopen()) }
            }
            guard let reopened else { throw moved }
            logger.notice(
                "the ledger file was opened again", metadata: ["ledger.path": "\(path)", "ledger.file": "\(reopened)"])
        }
        do { try await writeProbeMark() } catch { throw wrap(error) }
    }

    public func storageShortfall() -> LedgerError? {
        fileMoved() ?? floorShortfall()
    }

    /// The free space of the file's file system against `ledger.min_free_bytes`.
    private func floorShortfall() -> LedgerError? {
        guard minFreeBytes > 0, let free = Self.freeBytes(near: path), free < minFreeBytes else { return nil }
        return LedgerError(
            code: .unwritable,
            message:
                "disk below ledger.min_free_bytes (\(path)): \(free) bytes free, \(minFreeBytes) wanted; intake waits for space"
        )
    }

    /// A mark row, then a passive checkpoint: the mark alone can fit in WAL pages already on disk, while moving them
    /// into the file needs the file to grow, as the flow's writes do once the WAL is full. A checkpoint that cannot
    /// grow the file fails like them.
    ///
    /// Both go through the write batcher, in turn with the flow's writes: under load a probe queued behind the
    /// batcher's drain would wait past its deadline and call a working ledger unreachable.
    private func writeProbeMark() async throws {
        let now = Date().epochMilliseconds
        let batcher = batcher
        try await batcher.write { db in
            try db.execute(
                sql: """
                    INSERT INTO ledger_marks (name, value_ms) VALUES ('write_probe', ?)
                    ON CONFLICT (name) DO UPDATE SET value_ms = excluded.value_ms
                    """, arguments: [now])
        }
        try await batcher.checkpoint()
    }

    /// Why the path no longer leads to the open file (gone, or another file there), `nil` while it does.
    func fileMoved() -> LedgerError? {
        guard let identity = opened.withLock({ $0.identity }) else { return nil }
        guard let current = FileIdentity(of: path) else {
            return LedgerError(
                code: .unwritable,
                message: "cannot open the file (\(path)): it is gone; its volume was detached or the file removed")
        }
        guard current != identity else { return nil }
        return LedgerError(
            code: .unwritable,
            message:
                "cannot open the file (\(path)): another file is there now; its volume was mounted again or the file replaced"
        )
    }

    /// Opens the file at `path` again and uses it from now on, if it is this ledger: its `ledger_identity` mark the one
    /// ``migrate()`` read, at the same schema migrations. Returns why it was opened again; `nil` when nothing changed
    /// because the file there is not this ledger, cannot be opened (a volume not mounted yet: never a new file created
    /// in the empty mount point), another reopening is under way, or this ledger's identity was never recorded (a start
    /// on a disk too full to write it: only a restart opens the file again then).
    ///
    /// A file system that aborts on a disk error can lose its last commits although their syncs succeeded (ext4's
    /// journal, aborted under load, drops its last transaction: seen in about one failure in four). When any table of
    /// the new file ends before the open file's (its rows past the new one's last rowid: those commits, or all since an
    /// older copy of this ledger was put there), the open file — every commit the worker made, read through its
    /// descriptors on the failed volume — is copied over the new one whole, in one step (SQLite's online backup,
    /// holding the open file's writer), so what those commits updated and deleted comes back too. A commit the worker
    /// saw fail that the new file kept anyway is dropped by the copy; the worker does it again.
    ///
    /// Blocking (a copy of the whole file): the caller runs it off the cooperative pool.
    func reopen() -> String? {
        guard FileIdentity(of: path) != nil, let expected = identityMark.withLock({ $0 }) else { return nil }
        let started = reopening.withLock { busy -> Bool in
            if busy { return false }
            busy = true
            return true
        }
        guard started else { return nil }
        defer { reopening.withLock { $0 = false } }
        let candidate: OpenedFile
        do {
            candidate = try OpenedFile(path: path)
        } catch {
            refuse(nil, "a file that cannot be opened", ["iap.error": "\(Self.describe(error))"])
            return nil
        }
        let current = opened.withLock { $0.pool }
        var copied: [String] = []
        do {
            let found = try candidate.pool.read { db in
                try Int64.fetchOne(db, sql: "SELECT value_ms FROM ledger_marks WHERE name = 'ledger_identity'")
            }
            guard found == expected else {
                refuse(candidate, "another ledger", ["ledger.found_identity": "\(found.map(String.init) ?? "-")"])
                return nil
            }
            copied = try Self.copyIfBehind(from: current, into: candidate.pool)
        } catch let error as UnreadableOpenFile {
            // The failed volume no longer reads either: the file there is used as it is, as a restart would.
            logger.warning(
                "the ledger file that was open cannot be read any more; the file at its path is used as it is",
                metadata: ["ledger.path": "\(path)", "iap.error": "\(Self.describe(error.underlying))"])
        } catch let error as OtherSchema {
            refuse(candidate, "this ledger at other schema migrations", ["ledger.migrations": "\(error.detail)"])
            return nil
        } catch {
            refuse(candidate, "a file that cannot be read or written", ["iap.error": "\(Self.describe(error))"])
            return nil
        }
        if !copied.isEmpty {
            logger.warning(
                "the ledger file opened again lacked rows the worker had committed (lost by the volume's failure, or an older copy put there); the file that was open was copied over it",
                metadata: ["ledger.path": "\(path)", "ledger.tables_behind": "\(copied.joined(separator: ","))"])
        }
        let previous = opened.withLock { file in
            defer { file = candidate }
            return file
        }
        // Never closed: SQLite's last connection to a file deletes its -wal and -shm by path when it closes, and the
        // path leads to the new file now. Closing the old pool would delete the live ledger's log and index under the
        // new pool (commits lost). Its few descriptors stay open on the failed volume until the process ends.
        retiredFiles.withLock { $0.append(previous) }
        return "file \(candidate.identity.map { "\($0.device):\($0.inode)" } ?? "?")"
    }

    /// Says once for each file found at the path that it is not used.
    private func refuse(_ candidate: OpenedFile?, _ what: String, _ detail: Logger.Metadata) {
        let identity = candidate?.identity ?? FileIdentity(of: path)
        let firstTime = refusedFile.withLock { refused in
            defer { refused = identity }
            return refused != identity
        }
        guard firstTime else { return }
        logger.error(
            "the file at the ledger's path is \(what): not used; the worker waits for its own file",
            metadata: detail.merging(
                [
                    "ledger.path": "\(path)",
                    "ledger.identity": "\(identityMark.withLock { $0 }.map(String.init) ?? "-")",
                ]
            ) { new, _ in new })
    }

    /// The open file could not be read.
    struct UnreadableOpenFile: Error { let underlying: any Error }
    /// The two files' applied migrations differ.
    struct OtherSchema: Error { let detail: String }

    /// Copies `source` over `candidate` whole when a table of the candidate ends before the source's (a rowid past the
    /// candidate's last); returns those tables (none: nothing copied). `source` is read through its writer, the one
    /// connection a pool keeps for good (a reader may be opened afresh, by the path, which leads to the candidate now),
    /// and held for the copy, so no write of the worker's lands in it meanwhile.
    static func copyIfBehind(from source: DatabasePool, into candidate: DatabasePool) throws -> [String] {
        let migrations = "SELECT identifier FROM grdb_migrations ORDER BY identifier"
        let tablesSQL = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        let last = { (db: Database, table: String) in
            try Int64.fetchOne(db, sql: "SELECT MAX(rowid) FROM \(table.quotedDatabaseIdentifier)") ?? 0
        }
        let (held, ends): ([String], [String: Int64])
        do {
            (held, ends) = try source.writeWithoutTransaction { db in
                var ends: [String: Int64] = [:]
                for table in try String.fetchAll(db, sql: tablesSQL) { ends[table] = try last(db, table) }
                return (try String.fetchAll(db, sql: migrations), ends)
            }
        } catch {
            throw UnreadableOpenFile(underlying: error)
        }
        let (there, behind) = try candidate.read { db in
            var behind: [String] = []
            for (table, end) in ends.sorted(by: { $0.key < $1.key }) where try db.tableExists(table) {
                if try last(db, table) < end { behind.append(table) }
            }
            return (try String.fetchAll(db, sql: migrations), behind)
        }
        guard held == there else {
            throw OtherSchema(detail: "open file: \(held.last ?? "-"), file there: \(there.last ?? "-")")
        }
        guard !behind.isEmpty else { return [] }
        do {
            try source.writeWithoutTransaction { old in
                try candidate.writeWithoutTransaction { new in try old.backup(to: new) }
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_IOERR {
            // The failed volume could not give every page: the candidate is left as it was (the copy is one step).
            throw UnreadableOpenFile(underlying: error)
        }
        return behind
    }

    /// Writes the ledger's `ledger_identity` mark (a random number, in `value_ms` for want of another column) if it
    /// has none (a ledger made before it), and remembers it. Best effort: a ledger that cannot write at start (a full
    /// disk) is waited for by the monitor, not refused here.
    func markIdentity() async {
        do {
            let identity = Int64.random(in: 1...Int64.max)
            let mark = try await write { db in
                try db.execute(
                    sql:
                        "INSERT INTO ledger_marks (name, value_ms) VALUES ('ledger_identity', ?) ON CONFLICT (name) DO NOTHING",
                    arguments: [identity])
                return try Int64.fetchOne(db, sql: "SELECT value_ms FROM ledger_marks WHERE name = 'ledger_identity'")
            }
            identityMark.withLock { $0 = mark }
        } catch {
            let mark = try? await read { db in
                try Int64.fetchOne(db, sql: "SELECT value_ms FROM ledger_marks WHERE name = 'ledger_identity'")
            }
            identityMark.withLock { $0 = mark ?? nil }
        }
    }

    /// Bytes an unprivileged writer may still use on the file system holding `path` (its directory, so that a file
    /// not created yet is measured too); `nil` when it cannot be told.
    static func freeBytes(near path: String) -> Int64? {
        // The file system of the file itself, a symbolic link followed (SQLite follows it too).
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let directory = (resolved as NSString).deletingLastPathComponent
        return freeBytes(inDirectory: directory.isEmpty ? "." : directory)
    }

    /// Bytes an unprivileged writer may still use on the file system holding `directory`; `nil` when unknown.
    static func freeBytes(inDirectory directory: String) -> Int64? {
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else { return nil }
        let (bytes, overflow) = Int64(info.f_bavail).multipliedReportingOverflow(by: Int64(info.f_frsize))
        return overflow ? .max : bytes
    }
}

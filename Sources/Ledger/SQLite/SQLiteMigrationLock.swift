import Fulfilment

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One migrator at a time per ledger file, across processes: a worker starting while `find`, `ledger stats` or a
/// second process opens the same new ledger. GRDB's migrator reads which migrations ran once, before running each in
/// its own transaction, so two at once both ran the first one missing and the second failed ("table grants already
/// exists"), leaving that process unstarted. The lock is `flock` on `<ledger>-migrate.lock` beside the file (never on
/// the database file itself: closing another descriptor of it would drop SQLite's own POSIX locks in this process).
enum SQLiteMigrationLock {
    static func holding<T>(forDatabaseAt path: String, _ body: () throws -> T) throws -> T {
        // An in-memory or temporary database has no file another process could open.
        guard !path.isEmpty, path != ":memory:", !path.hasPrefix("file::memory:") else { return try body() }
        let lockPath = path + "-migrate.lock"
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw LedgerError(
                code: .migration,
                message: "cannot open \(lockPath) to migrate the ledger: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else {
                throw LedgerError(
                    code: .migration,
                    message: "cannot lock \(lockPath) to migrate the ledger: \(String(cString: strerror(errno)))")
            }
        }
        // Released when the descriptor is closed.
        return try body()
    }
}

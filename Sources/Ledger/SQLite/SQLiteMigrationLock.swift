import Foundation
import Fulfilment
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One migrator at a time per ledger file, across processes: a worker starting while `reprocess`, `reconcile` or a
/// second worker opens the same new ledger. GRDB's migrator reads which migrations ran once, before running each in
/// its own transaction, so two at once both ran the first one missing and the second failed ("table grants already
/// exists"), leaving that process unstarted.
///
/// The lock is `flock` on `<ledger>-migrate.lock` beside the file (never on the database file itself: closing another
/// descriptor of it would drop SQLite's own POSIX locks in this process), the path's symbolic links resolved so two
/// names of one file share it. The lock file is opened read-only and made readable by all (0644), so one created by
/// another user (an operator's `sudo iap-worker reprocess`) never keeps the worker's user from locking it. A lock held
/// longer than ``patience`` (a process stopped mid-migration) is an error that says so, never a silent hang.
enum SQLiteMigrationLock {
    static let patience: Duration = .seconds(120)

    static func holding<T>(forDatabaseAt path: String, logger: Logger, _ body: () throws -> T) async throws -> T {
        // An in-memory database has no file another process could open.
        guard !path.isEmpty, path != ":memory:", !path.hasPrefix("file:") else { return try body() }
        let lockPath = URL(fileURLWithPath: path).resolvingSymlinksInPath().path + "-migrate.lock"
        let descriptor = open(lockPath, O_RDONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw LedgerError(
                code: .migration,
                message: "cannot open \(lockPath) to migrate the ledger: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        let started = ContinuousClock.now
        var said = false
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                throw LedgerError(
                    code: .migration,
                    message: "cannot lock \(lockPath) to migrate the ledger: \(String(cString: strerror(errno)))")
            }
            guard ContinuousClock.now - started < patience else {
                throw LedgerError(
                    code: .migration,
                    message:
                        "another process has been migrating the ledger for over \(patience) (it holds \(lockPath)): "
                        + "is one stopped mid-migration?")
            }
            if !said {
                logger.info(
                    "waiting for another process migrating the ledger", metadata: ["ledger.lock": "\(lockPath)"])
                said = true
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        // Released when the descriptor is closed.
        return try body()
    }
}

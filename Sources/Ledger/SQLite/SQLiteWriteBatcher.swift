import Fulfilment
import GRDB
import Synchronization

/// Group commit for the SQLite ledger: writes that arrive while a transaction is being written wait and go
/// together into the next one.
///
/// Each caller still gets its own result, and only after the transaction holding its write has committed; a write
/// that throws is undone alone, its neighbours committed (see ``commit(_:_:)``). With hundreds of purchases in
/// flight this turns hundreds of transactions (and hops to the writer queue) per second into a few dozen.
final class SQLiteWriteBatcher: Sendable {
    private struct Pending: Sendable {
        let body: @Sendable (Database) throws -> any Sendable
        let continuation: CheckedContinuation<any Sendable, any Error>
    }

    private struct State {
        var pending: [Pending] = []
        /// Callers waiting for a checkpoint, run between two transactions of the drain.
        var checkpoints: [CheckedContinuation<Void, any Error>] = []
        var draining = false
    }

    private let pool: DatabasePool
    private let state = Mutex(State())

    init(pool: DatabasePool) {
        self.pool = pool
    }

    /// Writes waiting for the next transaction (for tests that need several in one batch).
    var waitingWrites: Int { state.withLock { $0.pending.count } }

    /// Runs `body` in the next transaction and returns its result once that transaction has committed.
    ///
    /// - Important: `body` may run twice (when a write of its batch throws, see ``commit(_:_:)``): it must do
    ///   nothing outside the database that a second run would repeat, and read the time or make ids before, not
    ///   inside.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let value = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<any Sendable, any Error>) in
            let startDrain = state.withLock { state in
                state.pending.append(Pending(body: { try body($0) }, continuation: continuation))
                guard !state.draining else { return false }
                state.draining = true
                return true
            }
            if startDrain { pool.asyncWriteWithoutTransaction { db in self.drain(db) } }
        }
        return value as! T
    }

    /// A passive checkpoint, between two of the drain's transactions: under a steady flow of writes the writer queue
    /// is the drain's for as long as writes keep coming, and a checkpoint queued behind it would wait that long.
    func checkpoint() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let startDrain = state.withLock { state in
                state.checkpoints.append(continuation)
                guard !state.draining else { return false }
                state.draining = true
                return true
            }
            if startDrain { pool.asyncWriteWithoutTransaction { db in self.drain(db) } }
        }
    }

    /// Runs on GRDB's writer queue until no write or checkpoint is waiting.
    private func drain(_ db: Database) {
        while true {
            let (batch, checkpoints) = state.withLock { state in
                let batch = state.pending
                let checkpoints = state.checkpoints
                state.pending = []
                state.checkpoints = []
                if batch.isEmpty, checkpoints.isEmpty { state.draining = false }
                return (batch, checkpoints)
            }
            if !checkpoints.isEmpty {
                let result = Result { try db.execute(sql: "PRAGMA wal_checkpoint(PASSIVE)") }
                for waiter in checkpoints { waiter.resume(with: result) }
            }
            guard !batch.isEmpty || !checkpoints.isEmpty else { return }
            guard !batch.isEmpty else { continue }
            let results = commit(batch, db)
            for (pending, result) in zip(batch, results) { pending.continuation.resume(with: result) }
        }
    }

    /// A write that throws is the exception: the batch runs in one transaction with no savepoint per write, which
    /// would have SQLite copy every page a write changes into a statement journal (a temporary file once it passes
    /// 64 KiB) only to throw it away at release. Only when a write throws with the transaction still open is the
    /// batch rolled back and run again with one savepoint per write, so that the failing write alone is undone; the
    /// writes are the ledger's statements on the one connection, so the second run decides what the first would have.
    private func commit(_ batch: [Pending], _ db: Database) -> [Result<any Sendable, any Error>] {
        run(batch, db, eachInSavepoint: false) ?? run(batch, db, eachInSavepoint: true)!
    }

    /// The batch in one transaction, each write in a savepoint of its own or not; `nil` when a write threw in a run
    /// without them (the transaction rolled back). A write that throws after SQLite rolled the whole transaction back
    /// by itself (a full disk, an I/O error) ends the batch with its error, which then says what happened to every
    /// write of it.
    private func run(_ batch: [Pending], _ db: Database, eachInSavepoint: Bool) -> [Result<any Sendable, any Error>]? {
        var results: [Result<any Sendable, any Error>] = []
        results.reserveCapacity(batch.count)
        do {
            try db.inTransaction(.immediate) {
                for pending in batch {
                    do {
                        results.append(.success(try eachInSavepoint ? Self.inSavepoint(pending, db) : pending.body(db)))
                    } catch {
                        guard db.isInsideTransaction else { throw error }
                        guard eachInSavepoint else { throw OneWriteFailed() }
                        results.append(.failure(error))
                    }
                }
                return .commit
            }
            return results
        } catch is OneWriteFailed {
            return nil
        } catch {
            // The transaction did not commit: no write of the batch is durable.
            return Array(repeating: .failure(error), count: batch.count)
        }
    }

    private static func inSavepoint(_ pending: Pending, _ db: Database) throws -> any Sendable {
        var value: (any Sendable)?
        try db.inSavepoint {
            value = try pending.body(db)
            return .commit
        }
        return value!
    }

    /// The first run's signal that a write threw inside a transaction still open: roll back, run with savepoints.
    private struct OneWriteFailed: Error {}
}

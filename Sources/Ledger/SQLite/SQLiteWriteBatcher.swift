import Fulfilment
import GRDB
import Synchronization

/// Group commit for the SQLite ledger: writes that arrive while a transaction is being written wait and go
/// together into the next one, each inside its own savepoint.
///
/// Each caller still gets its own result, and only after the transaction holding its write has committed;
/// a write that throws rolls back its savepoint alone. With hundreds of purchases in flight this turns
/// hundreds of transactions (and hops to the writer queue) per second into a few dozen.
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
            var results: [Result<any Sendable, any Error>] = []
            results.reserveCapacity(batch.count)
            do {
                try db.inTransaction(.immediate) {
                    for pending in batch {
                        do {
                            var value: (any Sendable)?
                            try db.inSavepoint {
                                value = try pending.body(db)
                                return .commit
                            }
                            results.append(.success(value!))
                        } catch {
                            // SQLite rolls the whole transaction back by itself after some errors (a full disk, an
                            // I/O error): what ran before is gone, and what follows would run outside it. The batch
                            // ends with this error, which says what happened to every write of it.
                            guard db.isInsideTransaction else { throw error }
                            results.append(.failure(error))
                        }
                    }
                    return .commit
                }
            } catch {
                // The transaction did not commit: no write of the batch is durable.
                results = Array(repeating: .failure(error), count: batch.count)
            }
            for (pending, result) in zip(batch, results) { pending.continuation.resume(with: result) }
        }
    }
}

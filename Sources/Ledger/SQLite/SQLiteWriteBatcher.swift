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

    /// Runs on GRDB's writer queue until no write is waiting.
    private func drain(_ db: Database) {
        while true {
            let batch = state.withLock { state in
                let batch = state.pending
                state.pending = []
                if batch.isEmpty { state.draining = false }
                return batch
            }
            guard !batch.isEmpty else { return }
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

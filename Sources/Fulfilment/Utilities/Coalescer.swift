import Synchronization

/// Group commit for any operation: a call that arrives while a batch is running waits, and goes with every other
/// call that arrived meanwhile into the next batch. Batches form by themselves from what is ready: a call that
/// finds nothing running runs at once, alone, so a quiet system adds no waiting.
///
/// The caller that starts a batch runs it (no hop to a queue of its own); when it ends, the first waiting call
/// starts the next one. The batch runs in a task of its own, so cancelling the caller that happens to run it does
/// not fail everyone else's calls.
///
/// One bad request must not fail the others: a batch that fails with an error `isolates` accepts (a statement the
/// database refused, say for one row's value) is run again one request at a time, so only the request that causes
/// it fails. An error it does not accept (the database is away) fails the whole batch, and ends a retry one by one.
package final class Coalescer<Request: Sendable, Response: Sendable>: Sendable {
    package typealias Run = @Sendable ([Request]) async throws -> [Response]

    private enum Turn {
        case done(Result<Response, any Error>)
        /// This call runs the next batch (it is the first pending one).
        case lead
    }

    private struct Entry {
        let id: UInt64
        let request: Request
        let continuation: CheckedContinuation<Turn, Never>
    }

    private struct State {
        var pending: [Entry] = []
        /// A batch is running, or a caller has been told to start one. While false, `pending` is empty.
        var running = false
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())
    private let run: Run
    private let isolates: @Sendable (any Error) -> Bool
    let maxBatch: Int

    /// - Parameters:
    ///   - maxBatch: calls per batch at most (what waits beyond it goes into the next).
    ///   - isolates: whether a failed batch is run again one request at a time.
    ///   - run: runs a batch; answers one response per request, in order.
    package init(
        maxBatch: Int = 512, isolates: @escaping @Sendable (any Error) -> Bool = { _ in false }, run: @escaping Run
    ) {
        self.maxBatch = max(1, maxBatch)
        self.isolates = isolates
        self.run = run
    }

    package func submit(_ request: Request) async throws -> Response {
        // Nothing running (a quiet system): this call runs alone, at once, without waiting for a turn.
        let (id, alone) = state.withLock { state -> (UInt64, Bool) in
            state.nextID &+= 1
            guard !state.running else { return (state.nextID, false) }
            state.running = true
            return (state.nextID, true)
        }
        if alone {
            let results = await results(of: [request])
            handOn()
            return try results[0].get()
        }
        let turn: Turn = await withCheckedContinuation { continuation in
            let leads = state.withLock { state -> Bool in
                state.pending.append(Entry(id: id, request: request, continuation: continuation))
                guard !state.running else { return false }
                state.running = true
                return true
            }
            if leads { continuation.resume(returning: .lead) }
        }
        switch turn {
        case .done(let result):
            return try result.get()
        case .lead:
            return try await lead(id)
        }
    }

    /// Runs the batch this call leads (its own entry is the first pending one), hands the lead on, answers the rest.
    ///
    /// Out of line, as is `results(of:)`: inlined into `submit`, their values joined the frame of every waiting call
    /// (8.7 KB each, one per purchase in flight), though only a batch's leader ever runs them.
    @inline(never)
    private func lead(_ id: UInt64) async throws -> Response {
        let batch = state.withLock { state -> [Entry] in
            let batch = Array(state.pending.prefix(maxBatch))
            state.pending.removeFirst(batch.count)
            return batch
        }
        let results = await results(of: batch.map(\.request))
        handOn()
        var mine: Result<Response, any Error> = .failure(CoalescerError.noAnswer)
        for (entry, result) in zip(batch, results) {
            if entry.id == id { mine = result } else { entry.continuation.resume(returning: .done(result)) }
        }
        return try mine.get()
    }

    /// After a batch: the first call that waited meanwhile leads the next one, or nothing runs any more.
    private func handOn() {
        let next = state.withLock { state -> Entry? in
            if let first = state.pending.first { return first }
            state.running = false
            return nil
        }
        next?.continuation.resume(returning: .lead)
    }

    /// One result per request: the batch's, or — when it failed with an error that `isolates` accepts — each
    /// request's own, run alone.
    @inline(never)
    private func results(of requests: [Request]) async -> [Result<Response, any Error>] {
        let run = self.run
        switch await Task(operation: { try await run(requests) }).result {
        case .success(let responses) where responses.count == requests.count:
            return responses.map { .success($0) }
        case .success:
            return requests.map { _ in .failure(CoalescerError.noAnswer) }
        case .failure(let error) where requests.count > 1 && isolates(error):
            var results: [Result<Response, any Error>] = []
            for request in requests {
                if case .failure(let error) = results.last, !isolates(error) {
                    results.append(.failure(error))
                    continue
                }
                let single = await Task(operation: { try await run([request]) }).result
                switch single {
                case .success(let responses) where responses.count == 1: results.append(.success(responses[0]))
                case .success: results.append(.failure(CoalescerError.noAnswer))
                case .failure(let error): results.append(.failure(error))
                }
            }
            return results
        case .failure(let error):
            return requests.map { _ in .failure(error) }
        }
    }
}

/// A batch answered with fewer or more responses than requests (a bug of the batch operation).
struct CoalescerError: Error, CustomStringConvertible {
    static let noAnswer = CoalescerError()
    var description: String { "a batch operation did not answer every request" }
}

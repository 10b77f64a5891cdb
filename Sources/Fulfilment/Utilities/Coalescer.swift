import Synchronization

/// Group commit for any operation: a call that arrives while a batch is running waits, and goes with every other
/// call that arrived meanwhile into the next batch. Batches form by themselves from what is ready: a call that
/// finds nothing running runs at once, alone, so a quiet system adds no waiting.
///
/// The caller that starts a batch runs it (no hop to a queue of its own); when it ends, the first waiting call
/// starts the next one. The batch runs in a task of its own, so cancelling the caller that happens to run it does
/// not fail everyone else's calls.
final class Coalescer<Request: Sendable, Response: Sendable>: Sendable {
    typealias Run = @Sendable ([Request]) async throws -> [Response]

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
    let maxBatch: Int

    /// - Parameters:
    ///   - maxBatch: calls per batch at most (what waits beyond it goes into the next).
    ///   - run: runs a batch; answers one response per request, in order.
    init(maxBatch: Int = 512, run: @escaping Run) {
        self.maxBatch = max(1, maxBatch)
        self.run = run
    }

    func submit(_ request: Request) async throws -> Response {
        let id = state.withLock { state -> UInt64 in
            state.nextID &+= 1
            return state.nextID
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
    private func lead(_ id: UInt64) async throws -> Response {
        let batch = state.withLock { state -> [Entry] in
            let batch = Array(state.pending.prefix(maxBatch))
            state.pending.removeFirst(batch.count)
            return batch
        }
        let requests = batch.map(\.request)
        let run = self.run
        let outcome = await Task { try await run(requests) }.result
        let next = state.withLock { state -> Entry? in
            if let first = state.pending.first { return first }
            state.running = false
            return nil
        }
        next?.continuation.resume(returning: .lead)
        var mine: Result<Response, any Error> = .failure(CoalescerError.noAnswer)
        for (index, entry) in batch.enumerated() {
            let result: Result<Response, any Error> =
                switch outcome {
                case .success(let responses) where responses.count == batch.count: .success(responses[index])
                case .success: .failure(CoalescerError.noAnswer)
                case .failure(let error): .failure(error)
                }
            if entry.id == id { mine = result } else { entry.continuation.resume(returning: .done(result)) }
        }
        return try mine.get()
    }
}

/// A batch answered with fewer or more responses than requests (a bug of the batch operation).
struct CoalescerError: Error, CustomStringConvertible {
    static let noAnswer = CoalescerError()
    var description: String { "a batch operation did not answer every request" }
}

import DequeModule
import Synchronization

/// Messages fetched by the poll thread and not yet taken by the application.
///
/// One producer (the poll thread) and one consumer (the message iterator).
final class MessageBuffer: Sendable {
    private struct State {
        var queue = Deque<KafkaMessage>()
        var waiter: CheckedContinuation<KafkaMessage?, any Error>?
        var finished = false
        var failure: KafkaError?
    }

    private let state = Mutex(State())

    var count: Int { state.withLock { $0.queue.count } }

    func append(_ message: KafkaMessage) {
        let waiter: CheckedContinuation<KafkaMessage?, any Error>? = state.withLock { state in
            guard !state.finished else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.queue.append(message)
            return nil
        }
        waiter?.resume(returning: message)
    }

    /// Drops buffered messages of partitions this member no longer owns; their new owner fetches them again.
    func purge(_ partitions: Set<TopicPartition>) {
        guard !partitions.isEmpty else { return }
        state.withLock { state in
            state.queue.removeAll { partitions.contains($0.topicPartition) }
        }
    }

    /// Ends the sequence: buffered messages are dropped (they were not processed, so they are redelivered),
    /// and the iterator returns `nil`, or throws `failure`.
    func finish(failure: KafkaError? = nil) {
        let waiter = state.withLock { state in
            state.finished = true
            state.failure = state.failure ?? failure
            state.queue.removeAll()
            defer { state.waiter = nil }
            return state.waiter
        }
        if let failure {
            waiter?.resume(throwing: failure)
        } else {
            waiter?.resume(returning: nil)
        }
    }

    func next() async throws -> KafkaMessage? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<KafkaMessage?, any Error>) in
                enum Outcome {
                    case message(KafkaMessage?)
                    case failure(KafkaError)
                    case wait
                }
                let outcome: Outcome = state.withLock { state in
                    if let message = state.queue.popFirst() { return .message(message) }
                    if state.finished { return state.failure.map { .failure($0) } ?? .message(nil) }
                    if Task.isCancelled { return .message(nil) }
                    precondition(state.waiter == nil, "KafkaConsumerMessages supports one iterating task")
                    state.waiter = continuation
                    return .wait
                }
                switch outcome {
                case .message(let message): continuation.resume(returning: message)
                case .failure(let error): continuation.resume(throwing: error)
                case .wait: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }
}

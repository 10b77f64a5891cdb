import DequeModule
import Dispatch
import Synchronization

/// Messages fetched by the poll thread and not yet taken by the application, counted in messages and bytes.
///
/// One producer (the poll thread) and one consumer (the message iterator).
final class MessageBuffer: Sendable {
    private struct State {
        var queue = Deque<KafkaMessage>()
        var bytes = 0
        var waiter: Waiter?
        var finished = false
        var failure: KafkaError?
        /// Bumped for every wait, so a timer can tell whether the wait it was armed for is still the current one.
        var waitSerial: UInt64 = 0
    }

    private struct Waiter {
        let continuation: CheckedContinuation<Outcome, Never>
        let serial: UInt64
    }

    /// How a wait ended.
    enum Outcome: Sendable {
        case message(KafkaMessage)
        case finished
        case failed(KafkaError)
        /// The wait's time ran out with nothing to deliver (nothing was taken from the buffer).
        case timedOut
    }

    private let state = Mutex(State())

    var count: Int { state.withLock { $0.queue.count } }
    /// Bytes of the buffered messages (``KafkaMessage/byteCount``).
    var bytes: Int { state.withLock { $0.bytes } }

    /// Appends `messages` in order under one lock; a waiting iterator gets the first at once.
    func append(contentsOf messages: some Collection<KafkaMessage>) {
        guard let first = messages.first else { return }
        let waiter: Waiter? = state.withLock { state in
            guard !state.finished else { return nil }
            let waiter = state.waiter
            state.waiter = nil
            for message in waiter == nil ? messages[...] : messages.dropFirst() {
                state.queue.append(message)
                state.bytes += message.byteCount
            }
            return waiter
        }
        waiter?.continuation.resume(returning: .message(first))
    }

    /// Drops buffered messages of partitions this member no longer owns; their new owner fetches them again.
    func purge(_ partitions: Set<TopicPartition>) {
        guard !partitions.isEmpty else { return }
        state.withLock { state in
            state.queue.removeAll { partitions.contains($0.topicPartition) }
            state.bytes = state.queue.reduce(0) { $0 + $1.byteCount }
        }
    }

    /// Ends the sequence: buffered messages are dropped (they were not processed, so they are redelivered),
    /// and the iterator returns `nil`, or throws `failure`.
    func finish(failure: KafkaError? = nil) {
        let (waiter, outcome): (Waiter?, Outcome) = state.withLock { state in
            state.finished = true
            state.failure = state.failure ?? failure
            state.queue.removeAll()
            state.bytes = 0
            defer { state.waiter = nil }
            return (state.waiter, state.failure.map { .failed($0) } ?? .finished)
        }
        waiter?.continuation.resume(returning: outcome)
    }

    /// The next message; `nil` once the buffer is finished (or the calling task is cancelled).
    func next() async throws -> KafkaMessage? {
        switch await wait(timeout: nil) {
        case .message(let message): return message
        case .failed(let error): throw error
        case .finished, .timedOut: return nil
        }
    }

    /// The messages buffered now, oldest first, at most `limit` of them and — after the first — at most
    /// `byteLimit` bytes together; waits for one when there are none. Empty once the buffer is finished (or the
    /// calling task is cancelled).
    func nextBatch(limit: Int, byteLimit: Int = .max) async throws -> [KafkaMessage] {
        var batch = state.withLock { state -> [KafkaMessage] in
            var batch: [KafkaMessage] = []
            var bytes = 0
            while batch.count < max(1, limit), let first = state.queue.first {
                guard batch.isEmpty || bytes + first.byteCount <= byteLimit else { break }
                state.queue.removeFirst()
                state.bytes -= first.byteCount
                bytes += first.byteCount
                batch.append(first)
            }
            return batch
        }
        if !batch.isEmpty { return batch }
        guard let message = try await next() else { return [] }
        batch.append(message)
        return batch
    }

    /// Waits for the next message at most `timeout` (for ever when `nil`).
    ///
    /// A message is either returned or left in the buffer: the timer and a delivery race under one lock, and
    /// whichever takes the waiter first decides, so a timeout never drops a message.
    func wait(timeout: Duration?) async -> Outcome {
        // A message already buffered is taken without a continuation or a cancellation handler.
        let buffered: KafkaMessage? = state.withLock { state in
            guard let message = state.queue.popFirst() else { return nil }
            state.bytes -= message.byteCount
            return message
        }
        if let buffered { return .message(buffered) }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                let immediate: Outcome? = state.withLock { state in
                    if let message = state.queue.popFirst() {
                        state.bytes -= message.byteCount
                        return .message(message)
                    }
                    if state.finished { return state.failure.map { .failed($0) } ?? .finished }
                    if Task.isCancelled { return .finished }
                    precondition(state.waiter == nil, "KafkaConsumerMessages supports one iterating task")
                    state.waitSerial &+= 1
                    state.waiter = Waiter(continuation: continuation, serial: state.waitSerial)
                    if let timeout { armTimer(serial: state.waitSerial, after: timeout) }
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            resumeWaiter(with: .finished, ifSerial: nil)
        }
    }

    private func armTimer(serial: UInt64, after timeout: Duration) {
        let (seconds, attoseconds) = timeout.components
        let nanoseconds = max(0, seconds) &* 1_000_000_000 &+ max(0, attoseconds / 1_000_000_000)
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanoseconds))) { [self] in
            resumeWaiter(with: .timedOut, ifSerial: serial)
        }
    }

    /// Ends the current wait with `outcome`, if there is one (and it is the wait `serial` names, when given).
    private func resumeWaiter(with outcome: Outcome, ifSerial serial: UInt64?) {
        let waiter: Waiter? = state.withLock { state in
            guard let waiter = state.waiter, serial == nil || waiter.serial == serial else { return nil }
            state.waiter = nil
            return waiter
        }
        waiter?.continuation.resume(returning: outcome)
    }
}

/// The consumer's messages, in fetch order per partition.
///
/// Iterate from one task only. The sequence ends when the consumer is closed, and throws when librdkafka
/// raises a fatal error. Cancelling the iterating task ends the iteration without closing the consumer.
public struct KafkaConsumerMessages: AsyncSequence, Sendable {
    public typealias Element = KafkaMessage
    let buffer: MessageBuffer

    public struct AsyncIterator: AsyncIteratorProtocol {
        let buffer: MessageBuffer

        public mutating func next() async throws -> KafkaMessage? {
            try await buffer.next()
        }

        /// Every message buffered now, oldest first, at most `limit` and (after the first) `byteLimit` bytes, or the
        /// next one to arrive when none is: one call for what a fetch brought. Empty when the consumer was closed (or
        /// the waiting task cancelled).
        public mutating func nextBatch(limit: Int, byteLimit: Int = .max) async throws -> [KafkaMessage] {
            try await buffer.nextBatch(limit: limit, byteLimit: byteLimit)
        }

        /// The next message, waiting at most `timeout`. A timeout takes nothing: a message that arrives just
        /// as the time runs out stays buffered for the next call.
        public mutating func next(within timeout: Duration) async throws -> KafkaNextMessage {
            switch await buffer.wait(timeout: timeout) {
            case .message(let message): return .message(message)
            case .timedOut: return .timedOut
            case .finished: return .ended
            case .failed(let error): throw error
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(buffer: buffer)
    }
}

/// What ``KafkaConsumerMessages/AsyncIterator/next(within:)`` found.
public enum KafkaNextMessage: Sendable, Hashable {
    case message(KafkaMessage)
    /// No message arrived in time.
    case timedOut
    /// The consumer was closed (or the waiting task cancelled).
    case ended
}

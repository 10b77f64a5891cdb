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
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(buffer: buffer)
    }
}

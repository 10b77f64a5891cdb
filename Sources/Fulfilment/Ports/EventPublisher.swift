/// Publishes records durably: returns once the broker acknowledged the record, or throws.
public protocol EventPublisher: Sendable {
    func publish(_ record: OutboundRecord) async throws

    /// Whether `error`, thrown by ``publish(_:)``, says the record is larger than the producer or the topic
    /// accepts (sending it again can never work).
    func isRecordTooLarge(_ error: any Error) -> Bool

    /// ``publish(_:)``, answering where the broker put the record (`nil` when the publisher cannot say).
    func publishLocated(_ record: OutboundRecord) async throws -> RecordLocation?
}

extension EventPublisher {
    public func isRecordTooLarge(_ error: any Error) -> Bool { false }

    public func publishLocated(_ record: OutboundRecord) async throws -> RecordLocation? {
        try await publish(record)
        return nil
    }
}

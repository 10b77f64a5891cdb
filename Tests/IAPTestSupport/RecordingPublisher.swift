import Foundation
import Fulfilment
import Synchronization

/// Records what the flow publishes; can be told to fail.
public final class RecordingPublisher: EventPublisher {
    public struct State {
        public var records: [OutboundRecord] = []
        public var failuresLeft = 0
        /// Records larger than this (value, key and headers) are refused as too large, as a broker would.
        public var maxRecordBytes = Int.max
        /// Topics that refuse every record (a topic that does not exist, or may not be written).
        public var refusedTopics: Set<String> = []
    }
    public let state = Mutex(State())

    public init() {}

    public struct PublishFailed: Error {}
    public struct RecordTooLarge: Error {}

    public func isRecordTooLarge(_ error: any Error) -> Bool { error is RecordTooLarge }

    public func failNext(_ count: Int) { state.withLock { $0.failuresLeft = count } }

    public func publish(_ record: OutboundRecord) async throws {
        try state.withLock { state in
            if state.failuresLeft > 0 {
                state.failuresLeft -= 1
                throw PublishFailed()
            }
            if state.refusedTopics.contains(record.topic) { throw PublishFailed() }
            let size =
                record.value.count + (record.key?.count ?? 0)
                + record.headers.reduce(0) { $0 + $1.name.utf8.count + ($1.value?.count ?? 0) }
            if size > state.maxRecordBytes { throw RecordTooLarge() }
            state.records.append(record)
        }
    }

    public var records: [OutboundRecord] { state.withLock { $0.records } }
    public func records(on topic: String) -> [OutboundRecord] { records.filter { $0.topic == topic } }

    /// The CloudEvents published to `topic`, decoded.
    public func events(on topic: String) -> [[String: Any]] {
        records(on: topic).compactMap { try? JSONSerialization.jsonObject(with: Data($0.value)) as? [String: Any] }
    }
}

import Fulfilment
import Synchronization

/// Records what the flow publishes. Refuses records larger than a limit as too large (as a broker or the producer's
/// `message.max.bytes` does), and can fail one chosen publish as a broker outage would.
public final class RecordingPublisher: EventPublisher {
    public struct RecordTooLarge: Error, CustomStringConvertible {
        public var description: String { "record too large" }
    }

    public struct InjectedFailure: Error, CustomStringConvertible {
        public var description: String { "injected publish failure" }
    }

    struct State {
        var records: [OutboundRecord] = []
        var limitedTopic: String?
        var maxRecordBytes = Int.max
        var publishes = 0
        var failPublish: Int?
    }

    let state = Mutex(State())

    public init() {}

    /// Refuses records on `topic` larger than `maxRecordBytes` (a topic's `max.message.bytes`).
    public func limit(deadLetterTopic topic: String, maxRecordBytes: Int) {
        state.withLock {
            $0.limitedTopic = topic
            $0.maxRecordBytes = maxRecordBytes
        }
    }

    /// Makes the `number`-th publish from now fail once (nil: none).
    public func failPublish(_ number: Int?) {
        state.withLock {
            $0.publishes = 0
            $0.failPublish = number
        }
    }

    public var records: [OutboundRecord] { state.withLock { $0.records } }
    public var count: Int { state.withLock { $0.records.count } }

    /// A record's size as the broker counts it, roughly: value, key, header names and values.
    public static func size(_ record: OutboundRecord) -> Int {
        record.value.count + (record.key?.count ?? 0)
            + record.headers.reduce(0) { $0 + $1.name.utf8.count + ($1.value?.count ?? 0) }
    }

    public func publish(_ record: OutboundRecord) async throws {
        try state.withLock { state in
            state.publishes += 1
            if state.publishes == state.failPublish {
                state.failPublish = nil
                throw InjectedFailure()
            }
            if record.topic == state.limitedTopic, Self.size(record) > state.maxRecordBytes { throw RecordTooLarge() }
            state.records.append(record)
        }
    }

    public func isRecordTooLarge(_ error: any Error) -> Bool { error is RecordTooLarge }
}

import Fulfilment
import Synchronization

/// The dead-letter topic in memory, as `reprocess` reads it: one partition, read from its committed offset up to its
/// end when the run opened; what a run marked done is committed only by `close(commit: true)`.
public final class MemoryDeadLetterSource: DeadLetterSource {
    private struct State {
        var records: [PurchaseInput] = []
        var committed: Int64 = 0
        var position: Int64 = 0
        var end: Int64 = 0
        var done: Int64?
        var closes: [Bool] = []
        /// `next()` throws ``DeadLetterSourceStopped`` at this offset (another run owns the partition).
        var stopAt: Int64?
    }
    private let state = Mutex(State())
    public static let topic = "purchase.completed.dlq"

    public init() {}

    /// Appends a dead-letter record (the factory's `OutboundRecord`) at the end of the topic.
    public func append(_ record: OutboundRecord, timestampMilliseconds: Int64? = nil) {
        state.withLock { state in
            let offset = Int64(state.records.count)
            state.records.append(
                PurchaseInput(
                    key: record.key, value: record.value, headers: record.headers,
                    source: MessageSource(topic: Self.topic, partition: 0, offset: offset),
                    timestampMilliseconds: timestampMilliseconds, provenanceTrusted: true))
        }
    }

    public func stop(at offset: Int64) { state.withLock { $0.stopAt = offset } }
    /// The next offset a new run starts from.
    public var committedOffset: Int64 { state.withLock { $0.committed } }
    /// Each `close(commit:)` of the runs so far.
    public var closes: [Bool] { state.withLock { $0.closes } }

    public func open() async throws -> [Int32: Int64] {
        state.withLock { state in
            state.position = state.committed
            state.end = Int64(state.records.count)
            state.done = nil
            return [0: state.end]
        }
    }

    public var endOffsets: [Int32: Int64] { state.withLock { [0: $0.end] } }

    public func next() async throws -> SourcedRecord? {
        let (record, stopped) = state.withLock { state -> (SourcedRecord?, Bool) in
            guard state.position < state.end else { return (nil, false) }
            if state.stopAt == state.position { return (nil, true) }
            let input = state.records[Int(state.position)]
            state.position += 1
            return (SourcedRecord(input: input, assignmentEpoch: 1, byteCount: input.value.count), false)
        }
        if stopped { throw DeadLetterSourceStopped(reason: "another run reads the partition") }
        return record
    }

    public var hasMore: Bool { state.withLock { $0.position < $0.end } }

    public func markDone(_ record: SourcedRecord) throws {
        state.withLock { $0.done = record.input.source.offset + 1 }
    }

    public func close(commit: Bool) async {
        state.withLock { state in
            state.closes.append(commit)
            if commit, let done = state.done { state.committed = done }
        }
    }
}

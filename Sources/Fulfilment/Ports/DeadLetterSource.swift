/// The dead-letter topic as `reprocess` reads it: from where the last run of the same filter left off, up to the topic's
/// end when the run started, so a record that fails again (written back to the same topic) is the next run's.
public protocol DeadLetterSource: Sendable {
    /// Starts the run; answers the end offsets it reads up to, by partition.
    func open() async throws -> [Int32: Int64]

    /// The next record before the end offsets, or `nil` once every partition has reached them.
    /// - Throws: ``DeadLetterSourceStopped`` when records stop coming before the end (another run owns a partition,
    ///   the consumer closed), or the source's own errors.
    func next() async throws -> SourcedRecord?

    /// The end offsets as the run knows them now: those ``open()`` answered, raised where a partition's first fetch
    /// showed its log ending later than the broker's answer at the start said (a broker whose latest-offset answer
    /// lags its log: docs/compatibility.md).
    var endOffsets: [Int32: Int64] { get }

    /// Whether some partition has not reached its end offset yet.
    var hasMore: Bool { get }

    /// The record's outcome is durable: its offset is stored, and committed by ``close(commit:)``.
    func markDone(_ record: SourcedRecord) throws

    /// Ends the run, committing what was marked done when `commit` is set.
    func close(commit: Bool) async
}

/// Records stopped coming before the end offsets; the run ends there, committing what it finished.
public struct DeadLetterSourceStopped: Error, Sendable, CustomStringConvertible {
    public var reason: String
    public init(reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// A partition of a topic the worker reads.
public struct SourcePartition: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var topic: String
    public var partition: Int32

    public init(_ topic: String, _ partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    public var description: String { "\(topic)[\(partition)]" }

    public static func < (lhs: SourcePartition, rhs: SourcePartition) -> Bool {
        (lhs.topic, lhs.partition) < (rhs.topic, rhs.partition)
    }
}

/// A record as a source delivers it.
public struct SourcedRecord: Sendable {
    public var input: PurchaseInput
    /// The assignment of its partition the record was fetched in: a record fetched before a revoke never belongs to a
    /// later assignment of the same partition (see ``SourceRebalance/assigned(_:)``).
    public var assignmentEpoch: UInt64
    /// The memory the record holds (value, key, headers and what each header costs beyond its bytes): what it weighs
    /// in the in-flight byte budget.
    public var byteCount: Int

    public init(input: PurchaseInput, assignmentEpoch: UInt64, byteCount: Int) {
        self.input = input
        self.assignmentEpoch = assignmentEpoch
        self.byteCount = byteCount
    }

    public var partition: SourcePartition { SourcePartition(input.source.topic, input.source.partition) }
}

/// A change of the partitions a member of the consumer group owns.
public enum SourceRebalance: Sendable, Hashable {
    /// These partitions were added, each with its new assignment epoch (larger than any before it).
    case assigned([SourcePartition: UInt64])
    /// These partitions are about to move to another member. Offsets stored while the handler runs are committed
    /// before they are released; records of them not yet taken are dropped.
    case revoking([SourcePartition])
    /// These partitions were taken away without a revoke (the session expired): another member may own them already,
    /// so nothing is committed for them.
    case lost([SourcePartition])
}

/// Where purchase messages come from: a consumer group's share of the purchases topic (Kafka in the daemon, memory in
/// the engine's tests). One task reads it.
///
/// Offsets are stored by the engine, only for records whose outcome is durable, as a contiguous watermark per
/// partition; the source commits what is stored.
public protocol PurchaseSource: Sendable {
    /// Joins the group on `topic`. From then on `onRebalance` is called for every change of this member's partitions,
    /// on a thread of the source's own that it may block (the rebalance waits for it): it must not wait on anything
    /// that needs the source to make progress.
    func start(topic: String, onRebalance: @escaping @Sendable (SourceRebalance) -> Void) throws

    /// The next records: at least one and at most `limit`, or as many as fit in `byteLimit` beyond the first; waits
    /// for one. Empty once the source has closed.
    func nextBatch(limit: Int, byteLimit: Int) async throws -> [SourcedRecord]

    /// Stores the next offset to commit (the one after the last finished record) per partition.
    func storeOffsets(_ offsets: [SourcePartition: Int64]) throws

    /// The partitions this member owns now.
    var assignment: [SourcePartition] { get }

    /// Stops fetching from those of `partitions` this member owns, until they are resumed or reassigned.
    func pause(_ partitions: [SourcePartition])

    /// Resumes fetching from `partitions`.
    func resume(_ partitions: [SourcePartition])

    /// Starts leaving the group without waiting: the partitions are revoked (through `onRebalance`), stored offsets
    /// committed, and ``nextBatch(limit:byteLimit:)`` ends.
    func initiateClose()

    /// Leaves the group and waits until it has. Safe to call more than once.
    func close() async
}

import DequeModule

/// The contiguous offset watermark of one partition: a message finishing early never lets the committed
/// offset jump past one still in flight.
///
/// Offsets must be started in increasing order (the order the partition delivers them); they may finish in
/// any order.
public struct OffsetTracker: Sendable, Hashable {
    private var pending = Deque<Int64>()
    private var finishedEarly: Set<Int64> = []
    /// The next offset to commit: one past the last offset below which everything has finished.
    public private(set) var watermark: Int64?

    public init() {}

    /// Messages started and not yet below the watermark.
    public var outstanding: Int { pending.count }

    public mutating func started(_ offset: Int64) {
        pending.append(offset)
    }

    /// Marks `offset` finished; returns the new watermark when it moved.
    public mutating func finished(_ offset: Int64) -> Int64? {
        finishedEarly.insert(offset)
        var moved = false
        while let first = pending.first, finishedEarly.remove(first) != nil {
            pending.removeFirst()
            watermark = first + 1
            moved = true
        }
        return moved ? watermark : nil
    }
}

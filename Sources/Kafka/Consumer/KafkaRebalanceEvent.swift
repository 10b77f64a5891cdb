/// A change of the partitions this member owns.
public enum KafkaRebalanceEvent: Sendable, Hashable {
    /// These partitions were added to this member's assignment. The handler runs before librdkafka takes them: a pause
    /// it asks for them is applied with the assignment, except for a partition librdkafka does not know yet (a
    /// member's first partitions of a topic), which is paused once its fetch has started (a message of it, or the next
    /// statistics, show that).
    case assigned([TopicPartition])
    /// These partitions are about to move to another member. Offsets stored while the handler runs are
    /// committed before the partitions are released; buffered messages of them are already dropped.
    case revoking([TopicPartition])
    /// These partitions were taken away without a revoke (the session expired): another member may already
    /// own them, so nothing is committed for them.
    case lost([TopicPartition])

    public var partitions: [TopicPartition] {
        switch self {
        case .assigned(let partitions), .revoking(let partitions), .lost(let partitions): partitions
        }
    }
}

/// Called on the consumer's poll thread for every rebalance.
///
/// - Important: It runs on a dedicated thread, not Swift's cooperative pool, and may block there to wait for
///   in-flight work of revoked partitions to finish (the rebalance waits for it). It must not call
///   ``KafkaConsumer/close()`` or wait on anything that needs the consumer's poll thread.
public typealias KafkaRebalanceHandler = @Sendable (KafkaRebalanceEvent) -> Void

import CRdKafka
import Dispatch
import Logging
import Synchronization

/// A Kafka group consumer over librdkafka.
///
/// Offsets are never stored automatically: the application calls ``storeOffset(for:)`` for a message whose
/// outcome is durable, and librdkafka commits stored offsets every `auto.commit.interval.ms`, on
/// ``commit()``, before partitions are revoked, and on ``close()``.
///
/// One dedicated thread owns the poll loop: it fetches into a bounded buffer (pausing fetches while the buffer
/// is full, so rebalances and `max.poll.interval.ms` are still served), and it runs the rebalance handler.
///
/// - Important: Call ``close()`` to leave the group cleanly; dropping the consumer without closing stops the
///   poll thread, but the group only notices after the session times out.
public final class KafkaConsumer: Sendable {
    let core: ConsumerCore

    /// The fetched messages. Iterate from one task.
    public var messages: KafkaConsumerMessages { KafkaConsumerMessages(buffer: core.buffer) }

    /// Creates the consumer and starts its poll thread. Nothing is fetched before ``subscribe(topics:)``.
    ///
    /// - Throws: ``KafkaError`` with code `.configuration` naming a rejected property, or `.clientCreation`.
    public init(
        configuration: KafkaConsumerConfiguration,
        logger: Logger,
        rebalanceHandler: KafkaRebalanceHandler? = nil,
        onStatistics: (@Sendable (KafkaStatistics) -> Void)? = nil
    ) throws(KafkaError) {
        self.core = try ConsumerCore(
            configuration: configuration, logger: logger, rebalanceHandler: rebalanceHandler,
            onStatistics: onStatistics)
        core.start()
    }

    deinit {
        core.requestClose()
    }

    /// Replaces the rebalance handler. Set it before ``subscribe(topics:)`` to see the first assignment.
    public func setRebalanceHandler(_ handler: KafkaRebalanceHandler?) {
        core.setRebalanceHandler(handler)
    }

    /// Joins the group and subscribes to `topics`.
    public func subscribe(topics: [String]) throws(KafkaError) {
        try core.subscribe(topics: topics)
    }

    /// Stores `message.offset + 1` as the partition's next offset to commit.
    public func storeOffset(for message: KafkaMessage) throws(KafkaError) {
        try core.storeOffsets([message.topicPartition: message.offset + 1])
    }

    /// Stores the next offsets to commit (the offset after the last finished message) per partition.
    public func storeOffsets(_ offsets: [TopicPartition: Int64]) throws(KafkaError) {
        try core.storeOffsets(offsets)
    }

    /// Commits the stored offsets now, synchronously with the group coordinator.
    public func commit() async throws(KafkaError) {
        try await core.commit()
    }

    /// The group's committed offsets for `partitions` (`nil` where none is committed).
    public func committedOffsets(for partitions: [TopicPartition], timeoutMilliseconds: Int32 = 5_000)
        async throws(KafkaError)
        -> [TopicPartition: Int64?]
    {
        try await core.committed(partitions, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// The partitions of `topic` with their low and high watermarks (the first offset, and the offset the next
    /// record will get), as the brokers report them now.
    public func watermarks(topic: String, timeoutMilliseconds: Int32 = 10_000) async throws(KafkaError) -> [Int32: (
        low: Int64, high: Int64
    )] {
        let client = core.client
        let result: Result<[Int32: (low: Int64, high: Int64)], KafkaError> = await ConsumerCore.offPool {
            var pointer: UnsafePointer<rd_kafka_metadata>?
            let err = rd_kafka_metadata(client.handle, 1, nil, &pointer, timeoutMilliseconds)
            guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata = pointer else {
                return .failure(KafkaError.from(err, code: .timeout, context: "metadata request"))
            }
            var partitions: [Int32] = []
            for index in 0..<Int(metadata.pointee.topic_cnt) {
                let entry = metadata.pointee.topics[index]
                guard String(cString: entry.topic) == topic, entry.err == RD_KAFKA_RESP_ERR_NO_ERROR else { continue }
                partitions = (0..<Int(entry.partition_cnt)).map { entry.partitions[$0].id }
            }
            rd_kafka_metadata_destroy(metadata)
            guard !partitions.isEmpty else {
                return .failure(KafkaError(code: .subscription, message: "topic \(topic) does not exist"))
            }
            var marks: [Int32: (low: Int64, high: Int64)] = [:]
            for partition in partitions {
                var low: Int64 = 0
                var high: Int64 = 0
                let err = rd_kafka_query_watermark_offsets(
                    client.handle, topic, partition, &low, &high, timeoutMilliseconds)
                guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
                    return .failure(
                        KafkaError.from(err, code: .timeout, context: "watermarks of \(topic)[\(partition)]"))
                }
                marks[partition] = (low, high)
            }
            return .success(marks)
        }
        return try result.get()
    }

    /// The next offset this consumer will fetch for each of `partitions` (`nil` where it has none yet).
    public func positions(for partitions: [TopicPartition]) -> [TopicPartition: Int64?] {
        let list = TopicPartitionList(partitions)
        _ = rd_kafka_position(core.client.handle, list.pointer)
        var positions: [TopicPartition: Int64?] = [:]
        for (partition, offset) in list.offsets { positions[partition] = offset >= 0 ? offset : nil }
        return positions
    }

    /// Stops fetching from `partitions` until they are resumed, or revoked: a pause belongs to an assignment, and
    /// partitions this member does not own now are ignored. Messages already buffered are still delivered.
    public func pause(_ partitions: [TopicPartition]) {
        core.setPaused(partitions, paused: true)
    }

    /// Resumes fetching from `partitions`.
    public func resume(_ partitions: [TopicPartition]) {
        core.setPaused(partitions, paused: false)
    }

    /// The partitions this member owns now.
    public var assignment: Set<TopicPartition> { core.assignment }

    /// The assignment `partition` currently belongs to, `nil` when this member does not own it. Every assignment
    /// of a partition gets a new, larger epoch; messages carry the epoch they were fetched in
    /// (``KafkaMessage/assignmentEpoch``). Read it in the rebalance handler to learn a new assignment's epoch.
    public func assignmentEpoch(for partition: TopicPartition) -> UInt64? {
        core.control.withLock { $0.epochs[partition] }
    }

    /// How many commits before a revocation the broker refused. Kafka 2.5+ accepts them during a cooperative
    /// rebalance; older brokers and librdkafka's mock cluster may answer REBALANCE_IN_PROGRESS, and then the
    /// new owner starts from the last committed offsets (messages are redelivered, never lost).
    public var revokeCommitFailures: Int { core.control.withLock { $0.revokeCommitFailures } }

    /// The latest librdkafka statistics (needs `statistics.interval.ms` > 0).
    public var statistics: KafkaStatistics? { core.client.context.statistics }

    /// Starts leaving the group without waiting: the poll thread revokes the partitions (through the rebalance
    /// handler), commits, and ends the message sequence. ``close()`` waits for it.
    public func initiateClose() {
        core.requestClose()
    }

    /// The high watermark of `partition` as the last fetch response for it told (librdkafka's cache; no request), or
    /// `nil` before any.
    public func cachedHighWatermark(of partition: TopicPartition) -> Int64? {
        var low: Int64 = -1
        var high: Int64 = -1
        let err = rd_kafka_get_watermark_offsets(core.client.handle, partition.topic, partition.partition, &low, &high)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, high >= 0 else { return nil }
        return high
    }

    /// A broker this process's clients reach but cannot speak to, met by any of them in the last two minutes (they
    /// share one ``BrokerProblemReporter``: the same brokers, the same cause): what `/readyz` says while the member is
    /// not in its group.
    public var brokerProblem: KafkaBrokerProblem? { core.client.context.brokerProblem }

    /// Time since the poll thread last returned from `rd_kafka_consumer_poll` (`nil` before the first poll):
    /// the liveness of the consumer.
    public var timeSinceLastPoll: Duration? {
        let last = core.lastPollUptime.load(ordering: .relaxed)
        guard last > 0 else { return nil }
        return .nanoseconds(Int64(DispatchTime.now().uptimeNanoseconds &- last))
    }

    /// Leaves the group: in-flight partitions are revoked through the rebalance handler, stored offsets are
    /// committed, and the message sequence ends. Safe to call more than once.
    public func close() async {
        core.requestClose()
        await core.pollThread.withLock { $0 }?.join()
    }
}

/// The consumer's shared state: the librdkafka handle, the buffer, and what the poll thread reconciles.
final class ConsumerCore: Sendable {
    struct Control {
        var assignment: Set<TopicPartition> = []
        /// Partitions the application paused.
        var applicationPaused: Set<TopicPartition> = []
        /// Partitions paused in librdkafka right now; only the poll thread changes it.
        var physicallyPaused: Set<TopicPartition> = []
        /// Partitions assigned whose fetch may not have started yet: their pause is left as it was settled before the
        /// assignment until one of their messages arrives, librdkafka's statistics made after the assignment show
        /// their fetch started, or the allowance passes (see ``ConsumerCore/settlePauses(ofAssigning:)``).
        var unstarted: [TopicPartition: UnstartedFetch] = [:]

        /// Drops from ``unstarted`` each partition whose fetch has started: shown by statistics made since its
        /// assignment, or, with none, assumed once its allowance has passed. While statistics made since say it has
        /// not started, it stays (a coordinator that does not answer holds the start for as long).
        mutating func forgetStartedFetches(statistics: KafkaStatistics?, now: ContinuousClock.Instant) {
            unstarted = unstarted.filter { partition, fetch in
                if let statistics, let made = statistics.monotonicMicroseconds, made > fetch.assignedAt {
                    return !statistics.fetchStarted.contains(partition)
                }
                return fetch.assumedBy > now
            }
        }
        /// The buffer is over its high-water mark.
        var bufferFull = false
        var closing = false
        var rebalanceHandler: KafkaRebalanceHandler?
        /// Commits before a revocation that the broker refused.
        var revokeCommitFailures = 0
        /// The assignment each owned partition belongs to; a new one for every assignment of a partition.
        var epochs: [TopicPartition: UInt64] = [:]
        var lastEpoch: UInt64 = 0
        /// An assignment (possibly empty) has reached the rebalance callback at least once.
        var assignedOnce = false
    }

    let client: RDKafkaClient
    let buffer = MessageBuffer()
    let control: Mutex<Control>
    let logger: Logger
    let pollThread = Mutex<PollThread?>(nil)
    /// `DispatchTime` uptime of the last poll; 0 before the first.
    let lastPollUptime = Atomic<UInt64>(0)
    private let consumerQueue: RDKafkaQueue
    private let highWater: Int
    private let lowWater: Int
    private let highWaterBytes: Int
    private let lowWaterBytes: Int
    private let cooperative: Bool
    /// See ``fetchStartAllowance(statisticsInterval:)``.
    let fetchStartAllowance: Duration
    /// A group-less reader: subscribing and committing are refused.
    let isReader: Bool

    init(
        configuration: KafkaConsumerConfiguration, logger: Logger, rebalanceHandler: KafkaRebalanceHandler?,
        onStatistics: (@Sendable (KafkaStatistics) -> Void)?
    ) throws(KafkaError) {
        let context = RDKafkaClientContext(logger: logger, onStatistics: onStatistics)
        self.client = try RDKafkaClient(
            type: RD_KAFKA_CONSUMER, configuration: configuration.effectiveProperties, context: context
        ) { conf in
            rd_kafka_conf_set_rebalance_cb(conf) { rk, err, partitions, opaque in
                guard let rk, let partitions, let opaque else { return }
                let context = Unmanaged<RDKafkaClientContext>.fromOpaque(opaque).takeUnretainedValue()
                context.rebalance(rk: rk, err: err, partitions: partitions)
            }
        }
        self.logger = logger
        self.control = Mutex(Control(rebalanceHandler: rebalanceHandler))
        self.highWater = configuration.maxBufferedMessages
        self.lowWater = max(0, configuration.maxBufferedMessages / 2)
        self.highWaterBytes = configuration.maxBufferedBytes
        self.lowWaterBytes = configuration.maxBufferedBytes / 2
        self.isReader = configuration.isReader
        // The consumer group protocol (KIP-848) assigns incrementally, as the cooperative assignor does.
        self.cooperative =
            configuration.usesConsumerGroupProtocol
            || (configuration.effectiveProperties["partition.assignment.strategy"] ?? "").contains("cooperative")
        self.fetchStartAllowance = Self.fetchStartAllowance(
            statisticsInterval: configuration.effectiveProperties["statistics.interval.ms"])
        // Errors, statistics and rebalances are served by consumer_poll on the poll thread.
        rd_kafka_poll_set_consumer(client.handle)
        self.consumerQueue = RDKafkaQueue(pointer: rd_kafka_queue_get_consumer(client.handle))
        context.rebalanceTarget.withLock { $0 = RebalanceTarget(core: self) }
    }

    deinit {
        rd_kafka_queue_destroy(consumerQueue.pointer)
    }

    func start() {
        let thread = PollThread(name: "kafka-consumer-poll") { [self] in pollLoop() }
        pollThread.withLock { $0 = thread }
    }

    func setRebalanceHandler(_ handler: KafkaRebalanceHandler?) {
        control.withLock { $0.rebalanceHandler = handler }
    }

    var assignment: Set<TopicPartition> { control.withLock { $0.assignment } }

    func requestClose() {
        control.withLock { $0.closing = true }
        rd_kafka_queue_yield(consumerQueue.pointer)
    }

    // MARK: Poll loop (poll thread only)

    private func pollLoop() {
        var fetched: [KafkaMessage] = []
        fetched.reserveCapacity(Self.maxDrain)
        loop: while !control.withLock({ $0.closing }) {
            reconcilePauses()
            var next = rd_kafka_consumer_poll(client.handle, 100)
            lastPollUptime.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
            // What librdkafka already holds is taken without waiting and handed over in one append (one wake of
            // the engine per fetch, not per message), up to the buffer's room in messages and bytes: the bound is
            // passed by at most one message, as with one message per poll. (`rd_kafka_consume_batch_queue` would
            // take them under one lock, but before librdkafka 2.1.0 — Debian 12 ships 2.0.2 — a pause or resume
            // during a batch can skip offsets, librdkafka #4208, and the worker pauses whenever its buffer is full: so
            // one message per poll on every version, and no version to decide on.)
            let room = (
                messages: max(1, min(Self.maxDrain, highWater - buffer.count)), bytes: highWaterBytes - buffer.bytes
            )
            var taken = 0
            var takenBytes = 0
            var fatal: KafkaError?
            while let message = next {
                defer { rd_kafka_message_destroy(message) }
                switch handle(message) {
                case .message(let copied):
                    taken += 1
                    takenBytes += copied.byteCount
                    fetched.append(copied)
                case .fatal(let error):
                    fatal = error
                case .none:
                    break
                }
                guard fatal == nil, taken < room.messages, takenBytes < room.bytes else { break }
                next = rd_kafka_consumer_poll(client.handle, 0)
            }
            if !fetched.isEmpty {
                // A poll in the drain can serve a rebalance: what was taken before a revoke is no longer this
                // member's (the revoke purged the buffer, not this array), so only messages whose assignment is
                // still current go in. Rebalances run on this thread, so none can slip in before the append.
                let current = control.withLock { control in
                    fetched.filter { control.epochs[$0.topicPartition] == $0.assignmentEpoch }
                }
                buffer.append(contentsOf: current)
                fetched.removeAll(keepingCapacity: true)
            }
            if let fatal {
                logger.critical("consumer stopped by a fatal error", metadata: ["kafka.error": "\(fatal.message)"])
                buffer.finish(failure: fatal)
                break loop
            }
        }
        // Serves the final revoke through the rebalance handler, commits, and leaves the group.
        let err = rd_kafka_consumer_close(client.handle)
        if err != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning(
                "consumer close reported an error", metadata: ["kafka.error": "\(RDKafkaErrorCode(err).message)"])
        }
        if Librdkafka.assignorStateBugApplies, cooperative, !isReader, !control.withLock({ $0.assignedOnce }) {
            // librdkafka before 2.3.0 (Debian ships 2.0.2) aborts in rd_kafka_destroy when the cooperative-sticky
            // assignor was chosen by a JoinGroup but no assignment has arrived yet: its state is still NULL and
            // rd_kafka_sticky_assignor_state_destroy asserts it is not (librdkafka #4312, fixed by #4381). That
            // window is exactly "stopped during start-up". The consumer has closed (left the group, committed):
            // only the handle's memory is left, so it is kept until the process exits instead of destroyed.
            // Versions with the fix never take this branch, nor does a group-less reader: it never joins a group, so
            // no assignor ever runs for it (and the console opens one per record page).
            client.keepHandleAtDeinit()
            logger.debug("consumer closed before its first assignment; its handle is kept (librdkafka #4312)")
        }
        buffer.finish()
    }

    /// Messages taken from librdkafka per wake of the engine at most.
    static let maxDrain = 256

    private enum Fetched {
        /// A message of an owned partition, copied and stamped with its assignment epoch.
        case message(KafkaMessage)
        case fatal(KafkaError)
    }

    /// Copies a fetched message (stamped with its partition's assignment now); `nil` for what is not delivered.
    private func handle(_ message: UnsafeMutablePointer<rd_kafka_message_t>) -> Fetched? {
        let err = message.pointee.err
        if err == RD_KAFKA_RESP_ERR_NO_ERROR {
            var copied = KafkaMessage(copying: message)
            // Looked up per message, at once: a rebalance served by the next poll must not restamp it.
            let epoch = control.withLock { control in
                // Its fetch has started: from now on it is paused like the rest.
                if !control.unstarted.isEmpty { control.unstarted[copied.topicPartition] = nil }
                return control.epochs[copied.topicPartition]
            }
            // A message of a partition no longer assigned (a fetch that raced a revoke) is not delivered.
            guard let epoch else { return nil }
            copied.assignmentEpoch = epoch
            return .message(copied)
        }
        if err == RD_KAFKA_RESP_ERR__PARTITION_EOF { return nil }
        if err == RD_KAFKA_RESP_ERR__FATAL { return client.fatalError().map { .fatal($0) } }
        let text = message.pointee.payload.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) }
        logger.warning(
            "consumer error", metadata: ["kafka.code": "\(RDKafkaErrorCode(err).name)", "kafka.error": "\(text ?? "")"])
        return nil
    }

    /// Brings librdkafka's paused set in line with what the application and the buffer ask for.
    private func reconcilePauses() {
        let count = buffer.count
        let bytes = buffer.bytes
        let statistics = control.withLock { $0.unstarted.isEmpty } ? nil : client.context.statistics
        let (toPause, toResume): (Set<TopicPartition>, Set<TopicPartition>) = control.withLock { control in
            if !control.bufferFull && (count >= highWater || bytes >= highWaterBytes) { control.bufferFull = true }
            if control.bufferFull && count <= lowWater && bytes <= lowWaterBytes { control.bufferFull = false }
            var wanted =
                control.bufferFull ? control.assignment : control.applicationPaused.intersection(control.assignment)
            if !control.unstarted.isEmpty {
                control.forgetStartedFetches(statistics: statistics, now: .now)
                // A partition whose fetch may not have started keeps the pause it was assigned with.
                let unstarted = Set(control.unstarted.keys)
                wanted = wanted.subtracting(unstarted).union(control.physicallyPaused.intersection(unstarted))
            }
            let toPause = wanted.subtracting(control.physicallyPaused)
            let toResume = control.physicallyPaused.subtracting(wanted)
            control.physicallyPaused = wanted
            return (toPause, toResume)
        }
        // A partition librdkafka did not pause (one it does not know yet) is not recorded as paused: asked again on the
        // next poll. One it did not resume for that reason is not paused there either.
        let notPaused = applyPause(toPause, pause: true)
        applyPause(toResume, pause: false)
        if !notPaused.isEmpty { control.withLock { $0.physicallyPaused.subtract(notPaused) } }
    }

    /// Pauses or resumes `partitions` in librdkafka (it waits until each is served); the partitions it did not.
    @discardableResult
    func applyPause(_ partitions: Set<TopicPartition>, pause: Bool) -> Set<TopicPartition> {
        guard !partitions.isEmpty else { return [] }
        let list = TopicPartitionList(partitions)
        let err =
            pause
            ? rd_kafka_pause_partitions(client.handle, list.pointer)
            : rd_kafka_resume_partitions(client.handle, list.pointer)
        if err != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning("pause or resume failed", metadata: ["kafka.error": "\(RDKafkaErrorCode(err).message)"])
            return partitions
        }
        let failed = list.failed
        if !failed.isEmpty {
            logger.debug(
                "pause or resume skipped partitions librdkafka does not know yet",
                metadata: ["kafka.partitions": "\(failed.sorted())", "kafka.pause": "\(pause)"])
        }
        return failed
    }

    func setPaused(_ partitions: [TopicPartition], paused: Bool) {
        control.withLock { control in
            if paused {
                // A pause belongs to the current assignment: one asked for a partition this member does not own (read
                // from an assignment the poll thread has revoked since) would otherwise be applied at its next assign.
                control.applicationPaused.formUnion(partitions.filter { control.assignment.contains($0) })
            } else {
                control.applicationPaused.subtract(partitions)
            }
        }
        rd_kafka_queue_yield(consumerQueue.pointer)
    }

    // MARK: Group membership and offsets

    func subscribe(topics: [String]) throws(KafkaError) {
        guard !isReader else { throw KafkaError(code: .subscription, message: "a group-less reader never subscribes") }
        let list = TopicPartitionList(topics.map { TopicPartition($0, RD_KAFKA_PARTITION_UA) })
        let err = rd_kafka_subscribe(client.handle, list.pointer)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError.from(err, code: .subscription, context: "subscribe to \(topics.joined(separator: ","))")
        }
    }

    func storeOffsets(_ offsets: [TopicPartition: Int64]) throws(KafkaError) {
        guard !offsets.isEmpty else { return }
        let list = TopicPartitionList(offsets)
        let err = rd_kafka_offsets_store(client.handle, list.pointer)
        if let failed = list.firstError() {
            throw KafkaError.from(failed.error, code: .offsetStore, context: "store offset for \(failed.partition)")
        }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError.from(err, code: .offsetStore) }
    }

    func commit() async throws(KafkaError) {
        guard !isReader else { throw KafkaError(code: .commit, message: "a group-less reader never commits") }
        let client = client
        let result: Result<Void, KafkaError> = await Self.offPool {
            let err = rd_kafka_commit(client.handle, nil, 0)
            if err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR__NO_OFFSET { return .success(()) }
            return .failure(KafkaError.from(err, code: .commit))
        }
        try result.get()
    }

    func committed(_ partitions: [TopicPartition], timeoutMilliseconds: Int32) async throws(KafkaError)
        -> [TopicPartition: Int64?]
    {
        let client = client
        let result: Result<[TopicPartition: Int64?], KafkaError> = await Self.offPool {
            let list = TopicPartitionList(partitions)
            let err = rd_kafka_committed(client.handle, list.pointer, Int32(timeoutMilliseconds))
            guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { return .failure(KafkaError.from(err, code: .commit)) }
            var offsets: [TopicPartition: Int64?] = [:]
            for (partition, offset) in list.offsets { offsets[partition] = offset >= 0 ? offset : nil }
            return .success(offsets)
        }
        return try result.get()
    }

    /// Runs a blocking librdkafka call on a Dispatch thread, keeping it off Swift's cooperative pool.
    static func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: body()) }
        }
    }
}

/// A librdkafka queue handle. `@unchecked Sendable`: librdkafka queues are thread-safe.
struct RDKafkaQueue: @unchecked Sendable {
    let pointer: OpaquePointer
}

import Foundation
import Fulfilment
import Gamebase
import Logging
import ServiceLifecycle
import Synchronization

/// The worker's engine: the purchase source (the Kafka consumer's poll thread in the daemon) feeds a dispatcher that
/// runs up to `maxInFlight` purchases at once, within and across partitions, never two with the same paymentSeq at once.
/// Offsets are stored as a contiguous watermark per partition, only for messages whose outcome is durable.
///
/// Admission is bounded twice: by slots (`maxInFlight`) and by the bytes of the records in flight
/// (`maxInFlightBytes`), so a burst of large records cannot exhaust memory; one record larger than the whole byte
/// budget still runs, alone.
///
/// Dependencies that fail as a whole — Gamebase (``GamebaseMonitor``) and the ledger (``LedgerMonitor``) — pause
/// intake and hold the purchases in flight until they answer again; nothing is dead-lettered for an outage.
///
/// Shutdown (SIGTERM/SIGINT through the service group): stop fetching, let in-flight purchases finish up to
/// the shutdown timeout, store and commit offsets, leave the group. What is still running then is abandoned (it is
/// redelivered), never dead-lettered or announced as failed.
public final class PurchaseEngine: Service {
    public struct Configuration: Sendable {
        public var purchasesTopic: String
        public var maxInFlight: Int
        /// Bytes of records (``SourcedRecord/byteCount``) in flight at most.
        public var maxInFlightBytes: Int
        public var shutdownTimeout: Duration
        public var breaker: CircuitBreaker.Configuration
        /// Retries of a message whose ledger or Kafka writes fail while the ledger otherwise answers, before it is
        /// dead-lettered (`internal_error`).
        public var infrastructureRetry: RetryPolicy

        public init(
            purchasesTopic: String, maxInFlight: Int = 512, maxInFlightBytes: Int = 32 << 20,
            shutdownTimeout: Duration = .seconds(30), breaker: CircuitBreaker.Configuration = .init(),
            infrastructureRetry: RetryPolicy = RetryPolicy(
                maxAttempts: 8, initialBackoff: .milliseconds(200), maxBackoff: .seconds(10))
        ) {
            self.purchasesTopic = purchasesTopic
            self.maxInFlight = maxInFlight
            self.maxInFlightBytes = maxInFlightBytes
            self.shutdownTimeout = shutdownTimeout
            self.breaker = breaker
            self.infrastructureRetry = infrastructureRetry
        }
    }

    let source: any PurchaseSource
    let processor: PurchaseProcessor
    let configuration: Configuration
    let metrics: any EngineMetrics
    let health: WorkerHealth
    let clock: any WorkerClock
    let logger: Logger
    let gamebaseMonitor: GamebaseMonitor
    let ledgerMonitor: LedgerMonitor
    let intake: IntakeSwitch
    let state: Mutex<EngineState>
    let slots: AsyncSemaphore
    let bytes: AsyncSemaphore

    public init(
        source: any PurchaseSource, processor: PurchaseProcessor, configuration: Configuration,
        gamebaseMonitor: GamebaseMonitor, ledgerMonitor: LedgerMonitor, intake: IntakeSwitch,
        metrics: any EngineMetrics, health: WorkerHealth, clock: any WorkerClock = .system, logger: Logger
    ) {
        self.source = source
        self.clock = clock
        self.processor = processor
        self.configuration = configuration
        self.gamebaseMonitor = gamebaseMonitor
        self.ledgerMonitor = ledgerMonitor
        self.intake = intake
        self.metrics = metrics
        self.health = health
        self.logger = logger
        self.state = Mutex(EngineState())
        self.slots = AsyncSemaphore(configuration.maxInFlight)
        self.bytes = AsyncSemaphore(configuration.maxInFlightBytes)
    }

    public func run() async throws {
        // A disk already below the ledger's free-space floor holds intake before the first message.
        ledgerMonitor.checkStorage()
        // Ready once the group has assigned partitions to this member (possibly none): see handleRebalance.
        try source.start(topic: configuration.purchasesTopic) { [weak self] event in self?.handleRebalance(event) }
        logger.info("consuming", metadata: ["kafka.topic": "\(configuration.purchasesTopic)"])
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.gamebaseMonitor.run() }
                group.addTask { await self.ledgerMonitor.run() }
                do {
                    // What a fetch brought, in one call: at most 64 messages and 1 MiB beyond the first (held here
                    // outside both the buffer's and the in-flight bounds while they wait for a slot).
                    while case let batch = try await source.nextBatch(limit: 64, byteLimit: 1 << 20), !batch.isEmpty {
                        for record in batch {
                            let weight = record.byteCount
                            await slots.acquire()
                            await bytes.acquire(weight)
                            switch admit(record, weight: weight) {
                            case .run(let work): group.addTask { await self.execute(work) }
                            case .queued: break  // runs after the message with the same paymentSeq, keeping its slot
                            case .dropped:
                                bytes.release(weight)
                                slots.release()
                            }
                        }
                    }
                } catch {
                    logger.critical("the purchase source failed", metadata: ["kafka.error": "\(error)"])
                }
                // The sequence ends once the consumer left the group; its revoke waited for in-flight work up to
                // the shutdown timeout. What still runs is abandoned: its offsets are not stored.
                if state.withLock({ $0.totalInFlight }) > 0 {
                    logger.warning("abandoning purchases still in flight at shutdown; they will be redelivered")
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
            self.health.setShuttingDown()
            self.logger.info("shutting down: draining in-flight purchases")
            self.source.initiateClose()
        }
        await source.close()
        logger.info("left the consumer group")
    }

    // MARK: Admission and completion

    enum Admission {
        case run(Work)
        /// Waits behind a message with the same paymentSeq.
        case queued
        /// Must not run: its partition is gone, or the message belongs to an earlier assignment of it.
        case dropped
    }

    /// Registers a fetched record.
    func admit(_ record: SourcedRecord, weight: Int) -> Admission {
        let parsed = processor.parse(record.input)
        let paymentSeq = try? parsed.get().paymentSeq
        let work = Work(
            input: record.input, parsed: parsed, partition: record.partition, epoch: record.assignmentEpoch,
            paymentSeq: paymentSeq, weight: weight, admittedAt: clock.instant)
        let (admission, inFlight) = state.withLock { state in (state.admit(work), state.totalInFlight) }
        metrics.setInFlight(inFlight)
        return admission
    }

    /// Runs a message, then any message with the same paymentSeq that waited for it.
    func execute(_ first: Work) async {
        var next: Work? = first
        while let work = next {
            let store = await run(work)
            next = complete(work, storeOffset: store)
            bytes.release(work.weight)
            slots.release()
        }
    }

    /// Marks `work` finished (storing the partition's new watermark when `storeOffset`); returns the next message
    /// that waited on the same paymentSeq.
    func complete(_ work: Work, storeOffset: Bool) -> Work? {
        let (watermark, next): (Int64?, Work?) = state.withLock { state in
            var watermark: Int64?
            if storeOffset {
                watermark =
                    state.update(work.partition, epoch: work.epoch) {
                        $0.tracker.finished(work.input.source.offset)
                    } ?? nil
            }
            var next: Work?
            if let paymentSeq = work.paymentSeq {
                if var queue = state.waiting[paymentSeq], !queue.isEmpty {
                    let following = queue.removeFirst()
                    state.waiting[paymentSeq] = queue
                    state.update(following.partition, epoch: following.epoch) { $0.queued -= 1 }
                    next = following
                } else {
                    state.waiting[paymentSeq] = nil
                }
            }
            return (watermark, next)
        }
        // Stored before the purchase stops counting as in flight: a revoke waits for it, then commits this offset.
        if let watermark {
            do {
                try source.storeOffsets([work.partition: watermark])
            } catch {
                // The partition was revoked meanwhile; its new owner starts from the last commit.
                logger.debug(
                    "offset not stored", metadata: ["kafka.partition": "\(work.partition)", "kafka.error": "\(error)"])
            }
        }
        let remaining = state.withLock { state in
            state.update(work.partition, epoch: work.epoch) { $0.inFlight -= 1 }
            state.totalInFlight -= 1
            return state.totalInFlight
        }
        metrics.setInFlight(remaining)
        return next
    }

    /// Whether `work`'s partition is still this member's, in the assignment it was admitted in.
    func owns(_ work: Work) -> Bool {
        state.withLock { state in
            guard let partition = state.partitions[work.partition] else { return false }
            return partition.owned && partition.epoch == work.epoch
        }
    }
}

/// One admitted message.
struct Work: Sendable {
    var input: PurchaseInput
    var parsed: Result<PurchaseMessage, MalformedMessage>
    var partition: SourcePartition
    /// The assignment of its partition it was admitted in.
    var epoch: UInt64
    var paymentSeq: String?
    /// Bytes it holds of the in-flight byte budget.
    var weight: Int
    var admittedAt: ContinuousClock.Instant
}

/// The engine's bookkeeping, behind one mutex.
struct EngineState: Sendable {
    struct Partition: Sendable {
        var tracker = OffsetTracker()
        /// The consumer's assignment epoch of this partition.
        var epoch: UInt64
        /// False once revoking started: nothing new starts on it.
        var owned = true
        var inFlight = 0
        /// Purchases in flight that are waiting for a dependency (Gamebase or the ledger) to answer again: a revoke
        /// does not wait for them.
        var held = 0
        /// Purchases admitted behind another with the same paymentSeq, not started: once the partition is revoked
        /// they never start, so a revoke does not wait for them either.
        var queued = 0

        /// Purchases a revoke waits for: those doing work now.
        var busy: Int { inFlight - held - queued }
    }

    var partitions: [SourcePartition: Partition] = [:]

    /// Changes `partition`'s state in place if it is still in assignment `epoch`; nil if not. In place: a copy taken
    /// out of the dictionary and written back made the offset tracker copy its deque and set (copy on write) twice
    /// for every message (issue #39).
    @discardableResult
    mutating func update<Result>(
        _ partition: SourcePartition, epoch: UInt64, _ body: (inout Partition) -> Result
    ) -> Result? {
        guard partitions[partition]?.epoch == epoch else { return nil }
        return body(&partitions[partition]!)
    }
    /// paymentSeqs in flight, with the messages waiting behind them.
    var waiting: [String: [Work]] = [:]
    var totalInFlight = 0

    /// Registers `work`: runs it now, queues it behind the message with the same paymentSeq, or drops it.
    ///
    /// A message taken from the buffer before a revoke belongs to that assignment only: admitted into a later one
    /// of the same partition, its offset could be stored past lower offsets the new assignment redelivers. So it
    /// is dropped unless its assignment epoch is the partition's current one (and the partition is owned).
    mutating func admit(_ work: Work) -> PurchaseEngine.Admission {
        guard partitions[work.partition]?.owned == true,
            update(
                work.partition, epoch: work.epoch,
                { (partition: inout Partition) -> Void in
                    partition.tracker.started(work.input.source.offset)
                    partition.inFlight += 1
                }) != nil
        else {
            return .dropped
        }
        totalInFlight += 1
        guard let paymentSeq = work.paymentSeq else { return .run(work) }
        if waiting[paymentSeq] != nil {
            waiting[paymentSeq]!.append(work)
            partitions[work.partition]!.queued += 1
            return .queued
        }
        waiting[paymentSeq] = []
        return .run(work)
    }
}

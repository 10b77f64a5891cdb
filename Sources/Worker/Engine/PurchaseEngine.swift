import Foundation
import Fulfilment
import Gamebase
import Kafka
import Ledger
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization

/// The worker's engine: one poll loop (the consumer's thread) feeds a dispatcher that runs up to
/// `maxInFlight` purchases at once, within and across partitions, never two with the same paymentSeq at once.
/// Offsets are stored as a contiguous watermark per partition, only for messages whose outcome is durable.
///
/// Shutdown (SIGTERM/SIGINT through the service group): stop fetching, let in-flight purchases finish up to
/// the shutdown timeout, store and commit offsets, leave the group.
public final class PurchaseEngine: Service {
    public struct Configuration: Sendable {
        public var purchasesTopic: String
        public var maxInFlight: Int
        public var shutdownTimeout: Duration
        public var breaker: CircuitBreaker.Configuration
        /// How often a purchase held by an open circuit (or an unclear Gamebase state) tries again.
        public var holdInterval: Duration
        /// Retries of a message whose ledger or Kafka writes fail, before it is dead-lettered (`internal_error`).
        public var infrastructureRetry: RetryPolicy

        public init(
            purchasesTopic: String, maxInFlight: Int = 512, shutdownTimeout: Duration = .seconds(30),
            breaker: CircuitBreaker.Configuration = .init(), holdInterval: Duration = .milliseconds(500),
            infrastructureRetry: RetryPolicy = RetryPolicy(maxAttempts: 8, initialBackoff: .milliseconds(200), maxBackoff: .seconds(10))
        ) {
            self.purchasesTopic = purchasesTopic
            self.maxInFlight = maxInFlight
            self.shutdownTimeout = shutdownTimeout
            self.breaker = breaker
            self.holdInterval = holdInterval
            self.infrastructureRetry = infrastructureRetry
        }
    }

    let consumer: KafkaConsumer
    let processor: PurchaseProcessor
    let configuration: Configuration
    let metrics: WorkerMetrics
    let health: WorkerHealth
    let logger: Logger
    let state: Mutex<EngineState>
    let breaker: Mutex<CircuitBreaker>
    let slots: AsyncSemaphore

    public init(
        consumer: KafkaConsumer, processor: PurchaseProcessor, configuration: Configuration, metrics: WorkerMetrics,
        health: WorkerHealth, logger: Logger
    ) {
        self.consumer = consumer
        self.processor = processor
        self.configuration = configuration
        self.metrics = metrics
        self.health = health
        self.logger = logger
        self.state = Mutex(EngineState())
        self.breaker = Mutex(CircuitBreaker(configuration: configuration.breaker))
        self.slots = AsyncSemaphore(configuration.maxInFlight)
    }

    public func run() async throws {
        consumer.setRebalanceHandler { [weak self] event in self?.handleRebalance(event) }
        // Ready once the group has assigned partitions to this member (possibly none): see handleRebalance.
        try consumer.subscribe(topics: [configuration.purchasesTopic])
        logger.info("consuming", metadata: ["kafka.topic": "\(configuration.purchasesTopic)"])
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                do {
                    for try await message in consumer.messages {
                        await slots.acquire()
                        switch admit(message) {
                        case .run(let work): group.addTask { await self.execute(work) }
                        case .queued: break  // runs after the message with the same paymentSeq, keeping its slot
                        case .dropped: slots.release()
                        }
                    }
                } catch {
                    logger.critical("the Kafka consumer failed", metadata: ["kafka.error": "\(error)"])
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
            self.consumer.initiateClose()
        }
        await consumer.close()
        logger.info("left the consumer group")
    }

    // MARK: Admission and completion

    enum Admission {
        case run(Work)
        /// Waits behind a message with the same paymentSeq.
        case queued
        /// Must not run: its partition is gone, or consumption stopped.
        case dropped
    }

    /// Registers a fetched message.
    func admit(_ message: KafkaMessage) -> Admission {
        let input = PurchaseInput(
            key: message.key, value: message.value, headers: message.headers.map { RecordHeader(name: $0.name, value: $0.value) },
            source: MessageSource(topic: message.topic, partition: message.partition, offset: message.offset),
            timestamp: message.timestampMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) })
        let parsed = processor.parse(input)
        let paymentSeq = try? parsed.get().paymentSeq
        let partition = message.topicPartition
        let admitted: (Work, runNow: Bool)? = state.withLock { state in
            guard state.stoppedBy == nil, var partitionState = state.partitions[partition], partitionState.owned else {
                return nil
            }
            partitionState.tracker.started(message.offset)
            partitionState.inFlight += 1
            state.partitions[partition] = partitionState
            state.totalInFlight += 1
            let work = Work(
                input: input, parsed: parsed, partition: partition, generation: partitionState.generation,
                paymentSeq: paymentSeq, admittedAt: .now)
            guard let paymentSeq else { return (work, true) }
            if state.waiting[paymentSeq] != nil {
                state.waiting[paymentSeq]!.append(work)
                return (work, false)
            }
            state.waiting[paymentSeq] = []
            return (work, true)
        }
        metrics.inFlight.set(to: Double(state.withLock { $0.totalInFlight }))
        guard let admitted else { return .dropped }
        return admitted.runNow ? .run(admitted.0) : .queued
    }

    /// Runs a message, then any message with the same paymentSeq that waited for it.
    func execute(_ first: Work) async {
        var next: Work? = first
        while let work = next {
            let store = await run(work)
            next = complete(work, storeOffset: store)
            slots.release()
        }
    }

    /// Marks `work` finished (storing the partition's new watermark when `storeOffset`); returns the next message
    /// that waited on the same paymentSeq.
    func complete(_ work: Work, storeOffset: Bool) -> Work? {
        let (watermark, next): (Int64?, Work?) = state.withLock { state in
            var watermark: Int64?
            if storeOffset, var partitionState = state.partitions[work.partition], partitionState.generation == work.generation {
                watermark = partitionState.tracker.finished(work.input.source.offset)
                state.partitions[work.partition] = partitionState
            }
            var next: Work?
            if let paymentSeq = work.paymentSeq {
                if var queue = state.waiting[paymentSeq], !queue.isEmpty {
                    next = queue.removeFirst()
                    state.waiting[paymentSeq] = queue
                } else {
                    state.waiting[paymentSeq] = nil
                }
            }
            return (watermark, next)
        }
        if let watermark {
            do {
                try consumer.storeOffsets([work.partition: watermark])
            } catch {
                // The partition was revoked meanwhile; its new owner starts from the last commit.
                logger.debug("offset not stored", metadata: ["kafka.partition": "\(work.partition)", "kafka.error": "\(error)"])
            }
        }
        let (remaining, stopped) = state.withLock { state in
            if var partitionState = state.partitions[work.partition], partitionState.generation == work.generation {
                partitionState.inFlight -= 1
                state.partitions[work.partition] = partitionState
            }
            state.totalInFlight -= 1
            return (state.totalInFlight, state.stoppedBy != nil)
        }
        metrics.inFlight.set(to: Double(remaining))
        if remaining == 0, !stopped, breaker.withLock({ $0.isOpen }) {
            // The circuit is open but no held purchase is left to probe it (their partitions moved away): let
            // messages in again; they wait for the circuit like held ones, and one of them probes.
            logger.notice("circuit open with no purchase left to probe; partitions resumed so the next message probes")
            consumer.resume(Array(consumer.assignment))
        }
        return next
    }

    /// Whether `work`'s partition is still this member's, in the generation it was admitted in.
    func owns(_ work: Work) -> Bool {
        state.withLock { state in
            guard let partition = state.partitions[work.partition] else { return false }
            return partition.owned && partition.generation == work.generation
        }
    }
}

/// One admitted message.
struct Work: Sendable {
    var input: PurchaseInput
    var parsed: Result<PurchaseMessage, MalformedMessage>
    var partition: TopicPartition
    var generation: Int
    var paymentSeq: String?
    var admittedAt: ContinuousClock.Instant
}

/// The engine's bookkeeping, behind one mutex.
struct EngineState: Sendable {
    struct Partition: Sendable {
        var tracker = OffsetTracker()
        var generation: Int
        /// False once revoking started: nothing new starts on it.
        var owned = true
        var inFlight = 0
    }

    var partitions: [TopicPartition: Partition] = [:]
    /// paymentSeqs in flight, with the messages waiting behind them.
    var waiting: [String: [Work]] = [:]
    var totalInFlight = 0
    var nextGeneration = 0
    /// Set by a configuration failure: nothing more is consumed until a restart.
    var stoppedBy: GamebaseError?
}

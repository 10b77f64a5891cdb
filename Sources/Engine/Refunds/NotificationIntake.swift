import Foundation
import Fulfilment
import Logging
import ServiceLifecycle
import Synchronization

/// Reads the store-notifications topic (`kafka.topics.store_notifications`) in a consumer group of its own and takes in
/// each record, one at a time: a believed notification is recorded and carried out (``RefundRecorder``), a refused one
/// is kept and counted; either way its offset is then stored. A record whose outcome could not be made durable (the
/// ledger or the event topic failing) is tried again with backoff, never skipped, and never holds up purchases: this
/// service shares nothing with the purchase engine but the ledger.
public final class NotificationIntake: Service {
    public struct Configuration: Sendable, Hashable {
        public var topic: String
        /// The first wait after a failure; it doubles up to `maxBackoff`.
        public var initialBackoff: Duration
        public var maxBackoff: Duration

        public init(topic: String, initialBackoff: Duration = .milliseconds(500), maxBackoff: Duration = .seconds(30)) {
            self.topic = topic
            self.initialBackoff = initialBackoff
            self.maxBackoff = maxBackoff
        }
    }

    let source: any PurchaseSource
    let reader: any StoreNotificationReading
    let recorder: RefundRecorder
    let configuration: Configuration
    let metrics: any EngineMetrics
    /// Where a stop is said (readiness's detail), beside `iap_service_stopped{service}`.
    let health: WorkerHealth?
    let clock: any WorkerClock
    let logger: Logger
    private let state = Mutex(IntakeState())
    /// This service's name in readiness and in `iap_service_stopped{service}`.
    public static let serviceName = "store_notifications_intake"

    struct IntakeState {
        var epochs: [SourcePartition: UInt64] = [:]
        var stopping = false
        /// The backoff wait in progress, cancelled by a graceful shutdown.
        var sleeper: Task<Void, any Error>?
    }

    public init(
        source: any PurchaseSource, reader: any StoreNotificationReading, recorder: RefundRecorder,
        configuration: Configuration, metrics: any EngineMetrics, health: WorkerHealth? = nil,
        clock: any WorkerClock = .system, logger: Logger
    ) {
        self.health = health
        self.source = source
        self.reader = reader
        self.recorder = recorder
        self.configuration = configuration
        self.metrics = metrics
        self.clock = clock
        self.logger = logger
    }

    public func run() async throws {
        try source.start(topic: configuration.topic) { [weak self] event in
            self?.state.withLock { state in
                switch event {
                case .assigned(let epochs): state.epochs.merge(epochs) { $1 }
                case .revoking(let partitions), .lost(let partitions):
                    for partition in partitions { state.epochs[partition] = nil }
                }
            }
        }
        metrics.setServiceStopped(service: Self.serviceName, stopped: false)
        logger.info("reading store notifications", metadata: ["kafka.topic": "\(configuration.topic)"])
        await withGracefulShutdownHandler {
            do {
                // Records are taken in order; one not taken in (the worker stopping) ends the run, so no later offset
                // is ever stored past it.
                intake: while case let batch = try await source.nextBatch(limit: 32, byteLimit: 1 << 20),
                    !batch.isEmpty
                {
                    for record in batch {
                        guard isCurrent(record) else { continue }
                        guard await takeIn(record.input) else { break intake }
                        do {
                            try source.storeOffsets([record.partition: record.input.source.offset + 1])
                        } catch {
                            // The partition moved meanwhile: its new owner reads the record again (it changes nothing).
                            logger.debug("store-notification offset not stored", metadata: ["kafka.error": "\(error)"])
                        }
                    }
                }
            } catch {
                // Refunds wait; purchases go on: the worker is not ended for it (a restart reads from the commit).
                // Said where operators look: readiness's detail, a metric and its alert.
                logger.critical(
                    "the store-notifications source failed; refunds are not taken in until this instance restarts",
                    metadata: ["kafka.error": "\(error)"])
                health?.setServiceStopped(Self.serviceName, reason: "the source failed: \(error)")
                metrics.setServiceStopped(service: Self.serviceName, stopped: true)
                try? await gracefulShutdown()
            }
        } onGracefulShutdown: {
            let sleeper = self.state.withLock { state in
                state.stopping = true
                return state.sleeper
            }
            sleeper?.cancel()
            self.source.initiateClose()
        }
        await source.close()
    }

    func isCurrent(_ record: SourcedRecord) -> Bool {
        state.withLock { $0.epochs[record.partition] == record.assignmentEpoch }
    }

    /// Takes in one record, trying again while the ledger or the publisher fails; `false` when the worker stops first
    /// (the record's offset is then not stored, and it is read again).
    func takeIn(_ input: PurchaseInput) async -> Bool {
        var backoff = configuration.initialBackoff
        while true {
            do {
                try await takeInOnce(input)
                return true
            } catch {
                logger.error(
                    "store notification not taken in; trying again",
                    metadata: [
                        "kafka.topic": "\(input.source.topic)", "kafka.partition": "\(input.source.partition)",
                        "kafka.offset": "\(input.source.offset)", "iap.error": "\(error)",
                    ])
            }
            let wait = backoff
            let sleeper = Task { [clock] in try await clock.sleep(for: wait) }
            let stopping = state.withLock { state in
                state.sleeper = sleeper
                return state.stopping
            }
            if stopping { sleeper.cancel() }
            do { try await sleeper.value } catch { return false }
            if state.withLock({ $0.stopping }) { return false }
            backoff = min(backoff * 2, configuration.maxBackoff)
        }
    }

    /// Reads, then records the notification or the refusal. Throws what the ledger or the publisher threw.
    func takeInOnce(_ input: PurchaseInput) async throws {
        let read = await reader.read(input.value, receivedAt: clock.now)
        let source = RefusedNotification.Source.record(
            topic: input.source.topic, partition: input.source.partition, offset: input.source.offset)
        guard let refusal = try await recorder.takeIn(read, body: input.value, source: source, metrics: metrics)
        else { return }
        var metadata: Logger.Metadata = [
            "iap.store": "\(refusal.store?.rawValue ?? "unknown")", "iap.refusal": "\(refusal.code)",
            "iap.detail": "\(refusal.detail)", "kafka.topic": "\(input.source.topic)",
            "kafka.partition": "\(input.source.partition)", "kafka.offset": "\(input.source.offset)",
        ]
        if let claimed = refusal.claimedId { metadata["iap.claimed_id"] = "\(claimed)" }
        logger.warning("store notification refused", metadata: metadata)
    }
}

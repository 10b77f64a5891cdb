import Console
import Foundation
import Fulfilment
import Gamebase
import Kafka
import Ledger
import Logging
import Lookup
import Prometheus
import ServiceLifecycle
import UnixSignals

/// The composition root: builds the daemon's services from the configuration. `iap-worker run`, the demo,
/// the benchmark and the tests all go through it.
public enum WorkerApplication {
    /// The running parts, for callers that want to look inside (tests, the demo, the benchmark).
    public struct Parts: Sendable {
        public let engine: PurchaseEngine
        public let processor: PurchaseProcessor
        public let sweeper: Sweeper
        public let reconciler: Reconciler
        /// `nil` when the ledger cannot prune (a test double).
        public let pruner: LedgerPruner?
        public let admin: AdminServer
        /// `nil` when `console.port` is 0 or the ledger cannot be searched (a test double).
        public let console: ConsoleServer?
        public let metrics: WorkerMetrics
        public let health: WorkerHealth
        public let consumer: KafkaConsumer
        public let producer: KafkaProducer
    }

    /// Runs the daemon until SIGTERM/SIGINT: opens (and migrates) the ledger, then runs the service group.
    ///
    /// The signals are trapped before anything else starts, so a SIGTERM that arrives while the ledger is
    /// still migrating or the consumer is being created still ends in a graceful shutdown and exit 0 — not in
    /// the default action (killed by the signal), which orchestrators would report as a crash. A PostgreSQL ledger
    /// that cannot be reached yet is waited for (`LedgerConnectRetry.untilConnected`); a signal during that wait
    /// cancels the start-up, and `run` returns.
    ///
    /// - Throws: `LedgerError` with code `configuration` when the ledger refuses this configuration (certificate,
    ///   credentials, database): restarting cannot help, so the process should exit non-zero.
    public static func run(configuration: WorkerConfiguration, logger: Logger) async throws {
        let shutdown = ShutdownRequest()
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let listener = Task {
            for await signal in signals {
                logger.info("signal received, shutting down gracefully", metadata: ["signal": "\(signal)"])
                await shutdown.request()
            }
        }
        defer { listener.cancel() }
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                try await LedgerStores.withStore(
                    url: configuration.ledgerURL, logger: logger, connectRetry: .untilConnected,
                    convertsToIncrementalVacuum: true
                ) {
                    ledger in
                    let metrics = WorkerMetrics()
                    let gamebase = GamebaseClient(
                        configuration: configuration.gamebaseConfiguration, logger: logger,
                        observer: { api, result, seconds in metrics.recordGamebase(api: api, result: result, seconds: seconds) })
                    let (group, _) = try buildServiceGroup(
                        configuration: configuration, ledger: ledger, gamebase: gamebase, signals: false, metrics: metrics,
                        logger: logger)
                    await shutdown.attach(group)
                    try await group.run()
                }
            }
            // A signal before the service group exists (waiting for the ledger) cancels the start-up instead.
            tasks.addTask {
                for await _ in shutdown.requestedBeforeStart { return }
            }
            // Whichever ends first ends the run: the worker (or its error), or a signal during the start-up; the
            // other is cancelled, and the start-up's CancellationError is discarded.
            try await tasks.next()
            tasks.cancelAll()
        }
    }

    /// Builds the services in dependency order (the engine last, so it shuts down first).
    ///
    /// - Parameters:
    ///   - gamebase: the Gamebase API; a ``GamebaseClient`` is shut down with the group.
    ///   - signals: install SIGTERM/SIGINT handlers (off in tests that run several workers in one process).
    public static func buildServiceGroup(
        configuration: WorkerConfiguration, ledger: any LedgerStore, gamebase: any GamebaseAPI, signals: Bool,
        metrics: WorkerMetrics = WorkerMetrics(), health: WorkerHealth = WorkerHealth(), adminHost: String = "0.0.0.0",
        logger: Logger
    ) throws -> (ServiceGroup, Parts) {
        let consumer = try KafkaConsumer(
            configuration: configuration.consumerConfiguration, logger: logger,
            onStatistics: { statistics in
                for (partition, lag) in statistics.consumerLag {
                    metrics.setConsumerLag(topic: partition.topic, partition: partition.partition, lag: lag)
                }
            })
        let producer = try KafkaProducer(configuration: configuration.producerConfiguration, logger: logger)
        health.setPollAgeSource { consumer.timeSinceLastPoll }
        let workerName = configuration.groupInstanceID ?? ProcessInfo.processInfo.hostName
        // Every ledger call has a deadline: a database that stops answering is an outage, never a hung purchase.
        // The flow's calls are batched across the purchases in flight (one read or one transaction for many).
        let ledgerStore = ledger
        let bounded = DeadlineLedgerStore(ledger, limit: configuration.ledgerCallTimeout)
        let ledger = LedgerBatcher(bounded)
        let intake = IntakeSwitch(consumer: consumer)
        let gamebaseMonitor = GamebaseMonitor(
            gamebase: gamebase, configuration: configuration.breaker,
            reloadSecretKey: secretKeyReloader(configuration: configuration, gamebase: gamebase, logger: logger),
            metrics: metrics, health: health, logger: logger, onTransition: { intake.set(.gamebase, holding: $0) })
        let ledgerMonitor = LedgerMonitor(
            ledger: bounded, metrics: metrics, health: health, logger: logger, onTransition: { intake.set(.ledger, holding: $0) })
        let processor = PurchaseProcessor(
            gamebase: gamebase, ledger: ledger, publisher: KafkaEventPublisher(producer: producer),
            configuration: FulfilmentConfiguration(
                groupID: configuration.groupID, itemGrantedTopic: configuration.topics.itemGranted,
                consumeFailedTopic: configuration.topics.consumeFailed, deadLetterTopic: configuration.topics.deadLetter,
                workerName: workerName, rejectTestPurchases: configuration.rejectTestPurchases,
                maxMessageBytes: configuration.maxMessageBytes, verifyRetry: configuration.retry,
                consumeRetry: configuration.retry),
            logger: logger)
        let engine = PurchaseEngine(
            consumer: consumer, processor: processor,
            configuration: .init(
                purchasesTopic: configuration.topics.purchases, maxInFlight: configuration.maxInFlight,
                maxInFlightBytes: configuration.maxInFlightBytes,
                shutdownTimeout: .milliseconds(configuration.shutdownTimeoutMilliseconds), breaker: configuration.breaker),
            gamebaseMonitor: gamebaseMonitor, ledgerMonitor: ledgerMonitor, intake: intake, metrics: metrics, health: health,
            logger: logger)
        let sweeper = Sweeper(
            processor: processor, interval: configuration.sweepInterval, grace: configuration.sweepGrace, metrics: metrics,
            gamebaseMonitor: gamebaseMonitor, ledgerMonitor: ledgerMonitor, logger: logger)
        let reconciler = Reconciler(
            pass: ReconcilePass(
                processor: processor, configuration: configuration.reconcile,
                health: WorkerReconcileHealth(
                    gamebaseMonitor: gamebaseMonitor, ledgerMonitor: ledgerMonitor, intake: intake),
                metrics: metrics, logger: logger),
            metrics: metrics, logger: logger)
        // Retention needs the store itself (wrappers and test doubles may not prune).
        let pruner = (ledgerStore as? any LedgerRetention).map {
            LedgerPruner(
                ledger: $0, policy: configuration.retention, callTimeout: configuration.ledgerCallTimeout, metrics: metrics,
                logger: logger)
        }
        let admin = AdminServer(host: adminHost, port: configuration.serverPort, metrics: metrics, health: health, logger: logger)
        var console: ConsoleServer?
        if configuration.console.isEnabled, !(ledgerStore is any PurchaseHistoryReader) {
            logger.warning("this ledger cannot be searched: the worker runs without its console")
        }
        if configuration.console.isEnabled, let reader = ledgerStore as? any PurchaseHistoryReader {
            console = ConsoleServer(
                configuration: configuration.console, reader: reader, gamebase: gamebase,
                status: WorkerConsoleStatus(configuration: configuration, metrics: metrics, health: health, instance: workerName),
                reconcileGrace: configuration.reconcile.isEnabled ? configuration.reconcile.grace : nil,
                records: configuration.console.showPayloads
                    ? KafkaDeadLetterRecords(configuration: configuration, logger: logger) : nil,
                logger: logger)
        }

        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let client = gamebase as? GamebaseClient {
            services.append(.init(service: OnShutdown { try? await client.shutdown() }))
        }
        services.append(.init(service: OnShutdown { await producer.close() }))
        services.append(.init(service: admin))
        if let console { services.append(.init(service: console)) }
        services.append(.init(service: sweeper))
        if let pruner { services.append(.init(service: pruner)) }
        if configuration.reconcile.isEnabled { services.append(.init(service: reconciler)) }
        services.append(.init(service: engine))
        let group = ServiceGroup(
            configuration: .init(
                services: services, gracefulShutdownSignals: signals ? [.sigterm, .sigint] : [],
                cancellationSignals: [], logger: logger))
        return (
            group,
            Parts(
                engine: engine, processor: processor, sweeper: sweeper, reconciler: reconciler, pruner: pruner, admin: admin, console: console,
                metrics: metrics, health: health, consumer: consumer, producer: producer)
        )
    }
}

/// While Gamebase refuses the worker's configuration, the monitor calls this before each probe: a secret key file
/// that now holds another key gives the client that key (a key rotated at the console, then in the mounted secret).
func secretKeyReloader(configuration: WorkerConfiguration, gamebase: any GamebaseAPI, logger: Logger) -> @Sendable () -> Void {
    guard let path = configuration.gamebaseSecretKeyFile, let client = gamebase as? GamebaseClient else { return {} }
    let file = SecretKeyFile(path: path)
    _ = try? file.read()
    return {
        guard let key = file.changedKey() else { return }
        logger.notice("the secret key file holds a new key; trying it", metadata: ["gamebase.secret_key_file": "\(path)"])
        client.updateSecretKey(key)
    }
}

/// Runs an action when the service group shuts down (after the services listed after it have stopped).
struct OnShutdown: Service {
    let action: @Sendable () async -> Void

    init(_ action: @escaping @Sendable () async -> Void) {
        self.action = action
    }

    func run() async throws {
        try? await gracefulShutdown()
        await action()
    }
}

/// A graceful-shutdown request that may arrive before the service group exists; it is passed on once the
/// group is attached, and meanwhile announced on ``requestedBeforeStart`` so the start-up can be abandoned.
actor ShutdownRequest {
    private var requested = false
    private var group: ServiceGroup?
    /// Yields when shutdown is requested while no service group is attached yet.
    nonisolated let requestedBeforeStart: AsyncStream<Void>
    private nonisolated let announceBeforeStart: AsyncStream<Void>.Continuation

    init() {
        (requestedBeforeStart, announceBeforeStart) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    func request() async {
        requested = true
        if let group {
            await group.triggerGracefulShutdown()
        } else {
            announceBeforeStart.yield()
        }
    }

    func attach(_ group: ServiceGroup) async {
        self.group = group
        if requested { await group.triggerGracefulShutdown() }
    }
}

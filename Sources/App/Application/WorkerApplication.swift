import AppStoreHTTP
import Console
import Engine
import Foundation
import Fulfilment
import Gamebase
import GamebaseHTTP
import GooglePlayHTTP
import Kafka
import Ledger
import Logging
import ServiceLifecycle
import Stores
import UnixSignals

/// The composition root: builds the daemon's services from the configuration. `iap-worker run`, the demo,
/// the benchmark and the tests all go through it.
public enum WorkerApplication {
    /// The running parts, for callers that want to look inside (tests, the demo, the benchmark).
    public struct Parts: Sendable {
        /// The engine and its background services.
        public let services: WorkerServices
        public let admin: AdminServer
        /// `nil` when `console.port` is 0.
        public let console: ConsoleServer?
        public let metrics: WorkerMetrics
        public let consumer: KafkaConsumer
        public let producer: KafkaProducer
        /// The store-notifications intake, when `kafka.topics.store_notifications` is read.
        public let notificationIntake: NotificationIntake?
        /// The pollers of the stores' histories: Apple's when `refunds.apple.issuer_id` is set, Google's when
        /// `refunds.google.service_account_file` is.
        public let historyPollers: [HistoryPoller]

        public var engine: PurchaseEngine { services.engine }
        public var processor: PurchaseProcessor { services.processor }
        public var health: WorkerHealth { services.health }
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
    /// - Parameter signals: SIGTERM and SIGINT, trapped by the caller as early as it could (`nil`: trapped here).
    public static func run(
        configuration: WorkerConfiguration, logger: Logger, signals given: UnixSignalsSequence? = nil
    ) async throws {
        let shutdown = ShutdownRequest()
        let signals: UnixSignalsSequence
        if let given { signals = given } else { signals = await UnixSignalsSequence(trapping: .sigterm, .sigint) }
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
                    convertsToIncrementalVacuum: true, minFreeBytes: Int64(configuration.ledgerMinFreeBytes)
                ) { store in
                    let ledger = store.roles
                    let metrics = WorkerMetrics()
                    let gamebase = GamebaseClient(
                        configuration: configuration.gamebaseConfiguration, logger: logger,
                        observer: { api, result, seconds in
                            metrics.recordGamebase(api: api, result: result, seconds: seconds)
                        })
                    let (group, _) = try buildServiceGroup(
                        configuration: configuration, ledger: ledger, gamebase: gamebase, signals: false,
                        metrics: metrics,
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

    /// Builds the services in dependency order (the engine last, so it shuts down first): the Kafka adapters of the
    /// purchase source and the event publisher, the engine and its background services over them
    /// (``WorkerServices``), the admin server and the console.
    ///
    /// - Parameters:
    ///   - ledger: the ledger's roles.
    ///   - gamebase: the Gamebase API; a ``GamebaseClient`` is shut down with the group.
    ///   - signals: install SIGTERM/SIGINT handlers (off in tests that run several workers in one process).
    public static func buildServiceGroup(
        configuration: WorkerConfiguration, ledger: LedgerRoles, gamebase: any GamebaseAPI, signals: Bool,
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
        health.setKafkaProblemSource { consumer.brokerProblem?.description }
        let workerName = configuration.workerName
        let services = WorkerServices(
            source: KafkaPurchaseSource(consumer: consumer), ledger: ledger, gamebase: gamebase,
            publisher: KafkaEventPublisher(producer: producer),
            configuration: configuration.engineConfiguration(workerName: workerName), metrics: metrics,
            health: health,
            reloadSecretKey: secretKeyReloader(configuration: configuration, gamebase: gamebase, logger: logger),
            logger: logger)
        let reader = try storeNotificationReader(configuration.refunds)
        var intake: NotificationIntake?
        if configuration.readsStoreNotifications {
            let notificationsConsumer = try KafkaConsumer(
                configuration: configuration.storeNotificationsConsumerConfiguration, logger: logger)
            intake = NotificationIntake(
                source: KafkaPurchaseSource(consumer: notificationsConsumer), reader: reader,
                recorder: services.refunds,
                configuration: NotificationIntake.Configuration(topic: configuration.topics.storeNotifications),
                metrics: metrics, health: health, logger: logger)
        }
        var appStore: AppStoreClient?
        var pollers: [HistoryPoller] = []
        var answerer: ConsumptionAnswerer?
        let owner = "\(workerName)-\(UUID().uuidString.prefix(8).lowercased())"
        if let key = configuration.refunds.appleKey {
            let client = AppStoreClient(baseURL: configuration.refunds.appStoreURL, key: key, logger: logger)
            appStore = client
            pollers.append(
                HistoryPoller(
                    source: AppleNotificationHistory(
                        api: client, reader: AppleBodyReader(settings: reader.apple),
                        environment: configuration.refunds.appleEnvironment == "sandbox" ? .sandbox : .production),
                    recorder: services.refunds, positions: ledger.refunds,
                    configuration: HistoryPoller.Configuration(interval: configuration.refunds.applePollInterval),
                    owner: owner, metrics: metrics, logger: logger))
            if var answers = configuration.refunds.consumptionAnswers {
                // Requests the poller brings are looked for at least as often as it reads them (a minute at most).
                answers.interval = min(answers.interval, configuration.refunds.applePollInterval)
                answerer = ConsumptionAnswerer(
                    api: client, refunds: ledger.refunds, deadline: services.refunds.deadline, configuration: answers,
                    metrics: metrics, logger: logger)
            }
        }
        var googlePlay: GooglePlayClient?
        if let account = configuration.refunds.googleAccount, let package = configuration.refunds.googlePackageName {
            let client = GooglePlayClient(
                baseURL: configuration.refunds.googleBaseURL, packageName: package, account: account, logger: logger)
            googlePlay = client
            pollers.append(
                HistoryPoller(
                    source: GoogleVoidedPurchases(api: client, packageName: package), recorder: services.refunds,
                    positions: ledger.refunds,
                    // 25 pages of 1,000 a pass: under Google's 30 queries in any 30 seconds, with the token's call.
                    configuration: HistoryPoller.Configuration(
                        interval: configuration.refunds.googlePollInterval, maxPages: 25),
                    owner: owner, metrics: metrics, logger: logger))
        }
        for poller in pollers {
            metrics.setStorePollInterval(
                store: poller.store.rawValue, seconds: Double(poller.configuration.interval / .milliseconds(1)) / 1_000)
        }
        let admin = AdminServer(
            host: adminHost, port: configuration.serverPort, metrics: metrics, health: health, logger: logger)
        var console: ConsoleServer?
        if configuration.console.isEnabled {
            console = ConsoleServer(
                configuration: configuration.console, reader: ledger.history, gamebase: gamebase,
                status: WorkerStatusReport(
                    configuration: configuration, metrics: metrics, health: health, instance: workerName),
                reconcileGrace: configuration.reconcile.isEnabled ? configuration.reconcile.grace : nil,
                records: configuration.console.showPayloads
                    ? KafkaDeadLetterRecords(configuration: configuration, logger: logger) : nil,
                refunds: ledger.refunds, logger: logger)
        }

        var group: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let client = gamebase as? GamebaseClient {
            group.append(.init(service: OnShutdown { try? await client.shutdown() }))
        }
        group.append(.init(service: OnShutdown { await producer.close() }))
        if let appStore { group.append(.init(service: OnShutdown { await appStore.shutdown() })) }
        if let googlePlay { group.append(.init(service: OnShutdown { await googlePlay.shutdown() })) }
        group.append(.init(service: admin))
        if let console { group.append(.init(service: console)) }
        if let intake { group.append(.init(service: intake)) }
        for poller in pollers { group.append(.init(service: poller)) }
        if let answerer { group.append(.init(service: answerer)) }
        for service in services.services { group.append(.init(service: service)) }
        let serviceGroup = ServiceGroup(
            configuration: .init(
                services: group, gracefulShutdownSignals: signals ? [.sigterm, .sigint] : [],
                cancellationSignals: [], logger: logger))
        return (
            serviceGroup,
            Parts(
                services: services, admin: admin, console: console, metrics: metrics, consumer: consumer,
                producer: producer, notificationIntake: intake, historyPollers: pollers)
        )
    }
}

/// The reader of the store-notifications topic: Google's notifications for the configured package, Apple's verified
/// to Apple Root CA – G3 (or, in tests, the configured roots) for the configured app and environment.
func storeNotificationReader(_ refunds: WorkerConfiguration.Refunds) throws -> StoreNotificationReader {
    var apple: StoreNotificationReader.Apple?
    if let bundleId = refunds.appleBundleId {
        var verifier =
            try refunds.appleRootCertificatesPEM.map { try AppleJWSVerifier(rootCertificatesPEM: $0) }
            ?? AppleJWSVerifier()
        verifier.futureSkew = refunds.maxClockSkew / .milliseconds(1) / 1_000
        apple = StoreNotificationReader.Apple(
            verifier: verifier, bundleId: bundleId,
            environment: refunds.appleEnvironment == "sandbox" ? .sandbox : .production)
    }
    return StoreNotificationReader(googlePackageName: refunds.googlePackageName, apple: apple)
}

/// While Gamebase refuses the worker's configuration, the monitor calls this before each probe: a secret key file
/// that now holds another key gives the client that key (a key rotated at the console, then in the mounted secret).
func secretKeyReloader(configuration: WorkerConfiguration, gamebase: any GamebaseAPI, logger: Logger)
    -> @Sendable () -> Void
{
    guard let path = configuration.gamebaseSecretKeyFile, let client = gamebase as? GamebaseClient else { return {} }
    let file = SecretKeyFile(path: path)
    _ = try? file.read()
    return {
        guard let key = file.changedKey() else { return }
        logger.notice(
            "the secret key file holds a new key; trying it", metadata: ["gamebase.secret_key_file": "\(path)"])
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

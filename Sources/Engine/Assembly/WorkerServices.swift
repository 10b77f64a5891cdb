import Fulfilment
import Gamebase
import Logging
import ServiceLifecycle

/// The engine's settings, from the worker's configuration.
public struct EngineConfiguration: Sendable {
    public var engine: PurchaseEngine.Configuration
    public var fulfilment: FulfilmentConfiguration
    /// The deadline of every ledger call.
    public var ledgerCallTimeout: Duration
    public var sweep: Sweeper.Configuration
    public var reconcile: Reconciler.Configuration
    public var retention: RetentionPolicy

    public init(
        engine: PurchaseEngine.Configuration, fulfilment: FulfilmentConfiguration,
        ledgerCallTimeout: Duration = .seconds(10), sweep: Sweeper.Configuration = .init(),
        reconcile: Reconciler.Configuration = .init(), retention: RetentionPolicy = .init()
    ) {
        self.engine = engine
        self.fulfilment = fulfilment
        self.ledgerCallTimeout = ledgerCallTimeout
        self.sweep = sweep
        self.reconcile = reconcile
        self.retention = retention
    }
}

/// The engine and its background services, built over the ports: a purchase source, the ledger's roles, the Gamebase
/// port, an event publisher and a clock. The composition root gives the adapters (Kafka, SQL, HTTP); the engine's
/// tests give memory ones and a test clock.
public struct WorkerServices: Sendable {
    public let engine: PurchaseEngine
    public let processor: PurchaseProcessor
    public let sweeper: Sweeper
    /// Records store notifications and publishes what they revoke: the intake's and the sweeper's.
    public let refunds: RefundRecorder
    public let reconciler: Reconciler
    public let pruner: LedgerPruner
    public let intake: IntakeSwitch
    public let gamebaseMonitor: GamebaseMonitor
    public let ledgerMonitor: LedgerMonitor
    public let health: WorkerHealth
    /// Sees and says steps of the wall clock.
    public let clockWatch: WallClockWatch
    let reconciles: Bool

    /// - Parameters:
    ///   - reloadSecretKey: called before each probe while Gamebase refuses the worker's configuration (a rotated
    ///     secret picked up without a restart).
    public init(
        source: any PurchaseSource, ledger: LedgerRoles, gamebase: any GamebaseAPI, publisher: any EventPublisher,
        configuration: EngineConfiguration, metrics: any EngineMetrics, health: WorkerHealth = WorkerHealth(),
        clock: any WorkerClock = .system, reloadSecretKey: @escaping @Sendable () -> Void = {}, logger: Logger
    ) {
        let deadline = LedgerDeadline(configuration.ledgerCallTimeout)
        let intake = IntakeSwitch(source: source, clock: clock)
        let gamebaseMonitor = GamebaseMonitor(
            gamebase: gamebase, configuration: configuration.engine.breaker, reloadSecretKey: reloadSecretKey,
            metrics: metrics, health: health, clock: clock, logger: logger,
            onTransition: { intake.set(.gamebase, holding: $0) })
        let ledgerMonitor = LedgerMonitor(
            probe: ledger.probe, metrics: metrics, health: health, clock: clock, logger: logger,
            onTransition: { intake.set(.ledger, holding: $0) })
        // Every ledger call has a deadline: a database that stops answering is an outage, never a hung purchase.
        // The flow's calls are batched across the purchases in flight (one read or one transaction for many).
        let processor = PurchaseProcessor(
            gamebase: gamebase, ledger: ledger.purchases, ledgerDeadline: deadline, publisher: publisher,
            configuration: configuration.fulfilment, logger: logger, clock: clock)
        engine = PurchaseEngine(
            source: source, processor: processor, configuration: configuration.engine,
            gamebaseMonitor: gamebaseMonitor, ledgerMonitor: ledgerMonitor, intake: intake, metrics: metrics,
            health: health, clock: clock, logger: logger)
        let refunds = RefundRecorder(
            refunds: ledger.refunds, purchases: ledger.purchases, publisher: publisher,
            events: configuration.fulfilment.events, deadline: deadline, clock: clock, logger: logger)
        sweeper = Sweeper(
            processor: processor, ledger: ledger.sweep, configuration: configuration.sweep, metrics: metrics,
            gamebaseMonitor: gamebaseMonitor, ledgerMonitor: ledgerMonitor, clock: clock, logger: logger,
            refunds: refunds)
        self.refunds = refunds
        reconciler = Reconciler(
            pass: ReconcilePass(
                processor: processor, ledger: ledger.reconciliation, configuration: configuration.reconcile,
                health: WorkerReconcileHealth(
                    gamebaseMonitor: gamebaseMonitor, ledgerMonitor: ledgerMonitor, intake: intake),
                metrics: metrics, clock: clock, logger: logger),
            metrics: metrics, logger: logger)
        pruner = LedgerPruner(
            ledger: ledger.retention, policy: configuration.retention, deadline: deadline, metrics: metrics,
            clock: clock, logger: logger)
        self.processor = processor
        self.intake = intake
        self.gamebaseMonitor = gamebaseMonitor
        self.ledgerMonitor = ledgerMonitor
        self.health = health
        clockWatch = WallClockWatch(clock: clock, metrics: metrics, logger: logger)
        reconciles = configuration.reconcile.isEnabled
    }

    /// The background services, then the engine (last, so that it shuts down first).
    public var services: [any Service] {
        var services: [any Service] = [clockWatch, sweeper, pruner]
        if reconciles { services.append(reconciler) }
        services.append(engine)
        return services
    }
}

import Engine
import Fulfilment
import Prometheus
import Synchronization
import Wire

/// The worker's Prometheus metrics (DESIGN §7), in a registry of its own (no global bootstrap, so several
/// workers can live in one test process): what the engine reports (``EngineMetrics``), and the Gamebase client's and
/// librdkafka's figures.
public final class WorkerMetrics: EngineMetrics {
    public let registry = PrometheusCollectorRegistry()

    public enum Name {
        public static let purchases = "iap_purchases_total"
        public static let gamebaseRequests = "iap_gamebase_requests_total"
        public static let gamebaseDuration = "iap_gamebase_request_duration_seconds"
        public static let purchaseDuration = "iap_purchase_duration_seconds"
        public static let inFlight = "iap_in_flight"
        public static let consumerLag = "iap_consumer_lag"
        public static let unconsumedGrants = "iap_unconsumed_grants"
        public static let setAsideGrants = "iap_set_aside_grants"
        public static let circuitOpen = "iap_circuit_open"
        public static let stopped = "iap_stopped"
        public static let ledgerUnavailable = "iap_ledger_unavailable"
        public static let ledgerWritable = "iap_ledger_writable"
        public static let rejections = "iap_rejections_total"
        public static let deadLetters = "iap_dead_letters_total"
        public static let oldestUnconsumedGrantAge = "iap_oldest_unconsumed_grant_age_seconds"
        public static let ready = "iap_ready"
        public static let pollAge = "iap_poll_age_seconds"
        public static let buildInfo = "iap_build_info"
        public static let reconciled = "iap_reconciled_total"
        public static let reconcileDuration = "iap_reconcile_duration_seconds"
        public static let reconcileOverruns = "iap_reconcile_overruns_total"
        public static let wallClockSteps = "iap_wall_clock_steps_total"
        public static let ledgerRows = "iap_ledger_rows"
        public static let ledgerPrunedRows = "iap_ledger_pruned_rows_total"
        public static let ledgerPruneCaughtUp = "iap_ledger_prune_caught_up_timestamp_seconds"
        public static let storeNotifications = "iap_store_notifications_total"
        public static let revocations = "iap_revocations_total"
        public static let storePollCompleted = "iap_store_poll_last_complete_timestamp_seconds"
        public static let storePolls = "iap_store_polls_total"
        public static let storePollInterval = "iap_store_poll_interval_seconds"
        public static let serviceStopped = "iap_service_stopped"
        public static let consumptionAnswers = "iap_consumption_answers_total"
        public static let consumptionDeadline = "iap_consumption_request_deadline_seconds"
    }

    /// The version `iap_build_info` reports.
    public static let version = "0.2.0"

    static func describe(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    /// Outcomes of `iap_purchases_total`.
    public static let outcomes = PurchaseOutcome.countedLabels

    private let purchaseCounters: [String: Counter]
    /// The same counts, readable in process (the demo and the benchmark summarise from them).
    private let purchaseTallies = Mutex<[String: Int]>([:])
    /// An API and a result: a key that costs no string built per call.
    private struct GamebaseCall: Hashable {
        var api: String
        var result: String
    }
    private let gamebaseTallies = Mutex<[GamebaseCall: Int]>([:])
    private let gamebaseCounters = Mutex<[GamebaseCall: Counter]>([:])
    private let gamebaseHistograms = Mutex<[String: DurationHistogram]>([:])
    private let lagGauges = Mutex<[String: Gauge]>([:])
    private let purchaseDuration: DurationHistogram
    // Set through setInFlight(_:), setUnconsumedGrants(_:) and setOldestUnconsumedGrantAge(_:), which keep the
    // console's readable copy beside them.
    private let inFlight: Gauge
    private let unconsumedGrants: Gauge
    private let setAsideGrants: Gauge
    private let circuitOpen: Gauge
    private let stopped: Gauge
    private let ledgerUnavailable: Gauge
    private let ledgerWritable: Gauge
    private let oldestUnconsumedGrantAge: Gauge
    private let ready: Gauge
    private let pollAge: Gauge
    /// `iap_rejections_total` and `iap_dead_letters_total` by reason, each with its count (one lock per count).
    private let reasonTallies = Mutex<(rejections: [String: ReasonTally], deadLetters: [String: ReasonTally])>(
        ([:], [:]))
    /// What the console shows of the gauges and counters above (a Prometheus gauge cannot be read back).
    private let readable = Mutex(Readable())
    private let inFlightCount = Atomic(0)
    /// Partitions whose lag is reported: the assigned ones (a revoked partition's gauge is removed).
    private let lagPartitions = Mutex<Set<String>>([])
    private let reconciledCounters: [String: Counter]
    private let reconciledTallies = Mutex<[String: Int]>([:])
    private let reconcileDuration: DurationHistogram
    /// Reconciliation passes that could not check every due user within `reconcile.interval_ms`.
    private let reconcileOverruns: Counter
    private let wallClockSteps: (forward: Counter, back: Counter)
    private let ledgerRowGauges: [String: Gauge]
    private let prunedRowCounters: [String: Counter]
    /// When this instance last finished a pruning pass with nothing left due (its start time until then; 0: off).
    private let ledgerPruneCaughtUp: Gauge

    /// `iap_store_notifications_total` and `iap_revocations_total`, made at their first count (their label values are
    /// few, but most never occur), keyed by their label values.
    private let refundCounters = Mutex<[[String]: Counter]>([:])
    /// When the Apple history poller last read every type; 0 until it has (or when it is off).
    /// `iap_store_poll_last_complete_timestamp_seconds`, by store (made at start for every store: 0 until its poller
    /// has read its history whole, or while it is off).
    private let storePollCompleted: [String: Gauge]
    private let storePollIntervals = Mutex<[String: Gauge]>([:])
    private let serviceStoppedGauges = Mutex<[String: Gauge]>([:])
    /// Seconds before the nearest deadline of a consumption request left unanswered (1e9: none).
    private let consumptionDeadline: Gauge

    /// Outcomes of `iap_reconciled_total`.
    public static let reconcileOutcomes = [
        "granted", "already_granted", "already_rejected", "rejected", "skipped_grace", "failed",
    ]

    static let passBuckets: [Duration] = [
        .milliseconds(100), .milliseconds(500), .seconds(1), .seconds(5), .seconds(15), .seconds(30), .seconds(60),
        .seconds(120), .seconds(300), .seconds(600), .seconds(1_200), .seconds(3_600),
    ]

    static let latencyBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250),
        .milliseconds(500), .seconds(1), .milliseconds(2_500), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]

    public init() {
        var counters: [String: Counter] = [:]
        for outcome in Self.outcomes {
            counters[outcome] = registry.makeCounter(
                descriptor: Self.describe(Name.purchases, "Purchase messages by outcome"),
                labels: [("outcome", outcome)])
        }
        purchaseCounters = counters
        purchaseDuration = registry.makeDurationHistogram(
            descriptor: Self.describe(Name.purchaseDuration, "From the message timestamp to its outcome"),
            buckets: Self.latencyBuckets)
        inFlight = registry.makeGauge(descriptor: Self.describe(Name.inFlight, "Purchases being processed"))
        unconsumedGrants = registry.makeGauge(
            descriptor: Self.describe(
                Name.unconsumedGrants, "Granted purchases waiting for Consume at Gamebase (set-aside grants apart)"))
        setAsideGrants = registry.makeGauge(
            descriptor: Self.describe(
                Name.setAsideGrants,
                "Grants revoked by a refund whose Consume Gamebase refused for good: not retried, not counted unconsumed"
            ))
        circuitOpen = registry.makeGauge(
            descriptor: Self.describe(Name.circuitOpen, "1 while the Gamebase circuit breaker is open"))
        stopped = registry.makeGauge(
            descriptor: Self.describe(Name.stopped, "1 while consumption is stopped by a configuration failure"))
        ledgerUnavailable = registry.makeGauge(
            descriptor: Self.describe(Name.ledgerUnavailable, "1 while ledger calls fail or time out (intake paused)"))
        ledgerWritable = registry.makeGauge(
            descriptor: Self.describe(
                Name.ledgerWritable,
                "1 while the ledger accepts writes; 0 through a full or read-only disk, an I/O error, a read-only server"
            ))
        ledgerWritable.set(to: 1)
        oldestUnconsumedGrantAge = registry.makeGauge(
            descriptor: Self.describe(
                Name.oldestUnconsumedGrantAge, "Age of the oldest grant still waiting for Consume, 0 when none"))
        ready = registry.makeGauge(descriptor: Self.describe(Name.ready, "1 when /readyz answers 200"))
        pollAge = registry.makeGauge(
            descriptor: Self.describe(Name.pollAge, "Seconds since the Kafka poll loop last returned"))
        registry.makeGauge(
            descriptor: Self.describe(Name.buildInfo, "Always 1; the version in a label"),
            labels: [("version", Self.version)]
        ).set(to: 1)
        var reconciled: [String: Counter] = [:]
        for outcome in Self.reconcileOutcomes {
            reconciled[outcome] = registry.makeCounter(
                descriptor: Self.describe(
                    Name.reconciled, "Payments listed unconsumed at Gamebase by the reconciler, by outcome"),
                labels: [("outcome", outcome)])
        }
        reconciledCounters = reconciled
        reconcileDuration = registry.makeDurationHistogram(
            descriptor: Self.describe(Name.reconcileDuration, "Duration of one reconciliation pass"),
            buckets: Self.passBuckets)
        reconcileOverruns = registry.makeCounter(
            descriptor: Self.describe(
                Name.reconcileOverruns,
                "Reconciliation passes that could not check every due user within the interval"))
        let stepHelp = "Steps of the wall clock against the monotonic one (NTP, a VM resumed, date -s), by direction"
        wallClockSteps = (
            registry.makeCounter(
                descriptor: Self.describe(Name.wallClockSteps, stepHelp), labels: [("direction", "forward")]),
            registry.makeCounter(
                descriptor: Self.describe(Name.wallClockSteps, stepHelp), labels: [("direction", "back")])
        )
        var rows: [String: Gauge] = [:]
        var pruned: [String: Counter] = [:]
        for table in LedgerTables.all {
            rows[table] = registry.makeGauge(
                descriptor: Self.describe(
                    Name.ledgerRows,
                    "Rows by ledger table (PostgreSQL: the statistics' estimate), refreshed by each pruning pass"),
                labels: [("table", table)])
        }
        for table in Set(PrunableRows.allCases.map(\.table)).sorted() {
            pruned[table] = registry.makeCounter(
                descriptor: Self.describe(Name.ledgerPrunedRows, "Ledger rows deleted by retention, by table"),
                labels: [("table", table)])
        }
        ledgerRowGauges = rows
        prunedRowCounters = pruned
        ledgerPruneCaughtUp = registry.makeGauge(
            descriptor: Self.describe(
                Name.ledgerPruneCaughtUp,
                "When this instance last finished a pruning pass with nothing left due (its start until then; 0: pruning off)"
            ))
        var completed: [String: Gauge] = [:]
        for store in Store.allCases {
            completed[store.rawValue] = registry.makeGauge(
                descriptor: Self.describe(
                    Name.storePollCompleted,
                    "When a store's history poller last read its windows to their end (0: not yet, or off)"),
                labels: [("store", store.rawValue)])
        }
        storePollCompleted = completed
        consumptionDeadline = registry.makeGauge(
            descriptor: Self.describe(
                Name.consumptionDeadline,
                "Seconds before the nearest deadline of an App Store consumption request left unanswered (1e9: none)"))
        consumptionDeadline.set(ConsumptionAnswerer.nothingPending)
    }

    private struct ReasonTally {
        let counter: Counter
        var count: Int
    }

    /// The values the operator console reads, kept beside the Prometheus ones (the counts by reason are the tallies').
    struct Readable {
        var lag: [String: WorkerStatus.PartitionLag] = [:]
        var unconsumedGrants: Int?
        var setAsideGrants: Int?
        var oldestUnconsumedGrantAge: Double?
        var lastReconcilePass: WorkerStatus.ReconcilePass?
    }

    /// Sets `iap_in_flight`.
    public func setInFlight(_ count: Int) {
        inFlight.set(to: Double(count))
        inFlightCount.store(count, ordering: .relaxed)
    }

    /// Sets `iap_unconsumed_grants`.
    public func setUnconsumedGrants(_ count: Int) {
        unconsumedGrants.set(to: Double(count))
        readable.withLock { $0.unconsumedGrants = count }
    }

    /// Sets `iap_set_aside_grants`.
    public func setSetAsideGrants(_ count: Int) {
        setAsideGrants.set(to: Double(count))
        readable.withLock { $0.setAsideGrants = count }
    }

    /// Sets `iap_oldest_unconsumed_grant_age_seconds` (0 when none).
    public func setOldestUnconsumedGrantAge(_ seconds: Double) {
        oldestUnconsumedGrantAge.set(to: seconds)
        readable.withLock { $0.oldestUnconsumedGrantAge = seconds }
    }

    /// The counts and gauges as the console shows them.
    var snapshot:
        (
            purchases: [String: Int], rejections: [String: Int], deadLetters: [String: Int], inFlight: Int,
            readable: Readable
        )
    {
        let (rejections, deadLetters) = reasonTallies.withLock {
            ($0.rejections.mapValues(\.count), $0.deadLetters.mapValues(\.count))
        }
        return (
            purchaseCounts, rejections, deadLetters, inFlightCount.load(ordering: .relaxed), readable.withLock { $0 }
        )
    }

    public func setCircuitOpen(_ open: Bool) { circuitOpen.set(to: open ? 1 : 0) }
    public func setStopped(_ isStopped: Bool) { stopped.set(to: isStopped ? 1 : 0) }
    public func setLedgerUnavailable(_ unavailable: Bool) { ledgerUnavailable.set(to: unavailable ? 1 : 0) }
    public func setLedgerWritable(_ writable: Bool) { ledgerWritable.set(to: writable ? 1 : 0) }
    public func setLedgerPruneCaughtUp(_ secondsSinceEpoch: Double) { ledgerPruneCaughtUp.set(to: secondsSinceEpoch) }

    /// Sets `iap_ledger_rows{table}`.
    public func setLedgerRows(_ counts: [String: Int]) {
        for (table, count) in counts { ledgerRowGauges[table]?.set(to: Double(count)) }
    }

    /// Counts rows retention deleted (`iap_ledger_pruned_rows_total{table}`).
    public func countPruned(table: String, by count: Int) {
        guard count > 0 else { return }
        prunedRowCounters[table]?.increment(by: Int64(count))
    }

    public func countStoreNotification(store: String, type: String, result: String) {
        refundCounter(
            Name.storeNotifications, "Store notifications taken in, by store, type and result",
            [("store", store), ("type", type), ("result", result)]
        ).increment()
    }

    public func countRevocation(store: String, reason: String) {
        refundCounter(Name.revocations, "Grants revoked by a store refund", [("store", store), ("reason", reason)])
            .increment()
    }

    public func setStorePollCompleted(store: String, at secondsSinceEpoch: Double) {
        storePollCompleted[store]?.set(secondsSinceEpoch)
    }

    public func setServiceStopped(service: String, stopped: Bool) {
        setLabeled(
            serviceStoppedGauges, Name.serviceStopped, "1 when a background service stopped while the worker goes on",
            ("service", service), to: stopped ? 1 : 0)
    }

    /// `iap_store_poll_interval_seconds{store}`: a store poller's configured interval (`refunds.<store>.interval_ms`),
    /// set at start, so the poller alerts follow it.
    public func setStorePollInterval(store: String, seconds: Double) {
        setLabeled(
            storePollIntervals, Name.storePollInterval,
            "A store's history poller's interval (refunds.<store>.interval_ms)",
            ("store", store), to: seconds)
    }

    /// Sets the gauge of one label value, made at its first use.
    private func setLabeled(
        _ gauges: borrowing Mutex<[String: Gauge]>, _ name: String, _ help: String, _ label: (String, String),
        to value: Double
    ) {
        gauges.withLock { gauges in
            let gauge =
                gauges[label.1]
                ?? registry.makeGauge(descriptor: Self.describe(name, help), labels: [label])
            gauges[label.1] = gauge
            gauge.set(value)
        }
    }

    public func countStorePoll(store: String, result: String) {
        refundCounter(
            Name.storePolls, "Passes of a store's history poller, by result (complete, incomplete, or an error code)",
            [("store", store), ("result", result)]
        ).increment()
    }

    public func countConsumptionAnswer(_ result: String) {
        refundCounter(
            Name.consumptionAnswers, "Attempts at answering App Store consumption requests, by result",
            [("result", result)]
        ).increment()
    }

    public func setConsumptionDeadline(secondsLeft: Double) {
        consumptionDeadline.set(secondsLeft)
    }

    private func refundCounter(_ name: String, _ help: String, _ labels: [(String, String)]) -> Counter {
        refundCounters.withLock { counters in
            let key = [name] + labels.map(\.1)
            if let counter = counters[key] { return counter }
            let counter = registry.makeCounter(descriptor: Self.describe(name, help), labels: labels)
            counters[key] = counter
            return counter
        }
    }

    /// Counts payments a reconciliation pass handled (`iap_reconciled_total{outcome}`).
    public func countReconciled(_ outcome: String, by count: Int) {
        guard count > 0, let counter = reconciledCounters[outcome] else { return }
        counter.increment(by: Int64(count))
        reconciledTallies.withLock { $0[outcome, default: 0] += count }
    }

    /// Payments counted by reconciliation passes so far, by outcome.
    public var reconciledCounts: [String: Int] { reconciledTallies.withLock { $0 } }

    /// A reconciliation pass ended before checking every due user (`iap_reconcile_overruns_total`).
    public func countWallClockStep(forward: Bool) {
        (forward ? wallClockSteps.forward : wallClockSteps.back).increment()
    }

    public func countReconcileOverrun() {
        reconcileOverruns.increment()
    }

    /// A reconciliation pass ended: its duration (`iap_reconcile_duration_seconds`) and, for the console, its summary.
    public func recordReconcilePass(_ duration: Duration, summary: WorkerStatus.ReconcilePass) {
        reconcileDuration.record(max(.zero, duration))
        readable.withLock { $0.lastReconcilePass = summary }
    }

    /// Counts a rejection (`iap_rejections_total{reason}`) or a dead letter (`iap_dead_letters_total{reason}`).
    public func countReason(_ reason: String, deadLettered: Bool) {
        let counter = reasonTallies.withLock { tallies in
            func count(_ kind: inout [String: ReasonTally]) -> Counter {
                if let tally = kind[reason] {
                    kind[reason]?.count += 1
                    return tally.counter
                }
                let name = deadLettered ? Name.deadLetters : Name.rejections
                let counter = registry.makeCounter(
                    descriptor: Self.describe(
                        name, deadLettered ? "Dead-lettered messages by reason" : "Rejected purchase messages by reason"
                    ),
                    labels: [("reason", reason)])
                kind[reason] = ReasonTally(counter: counter, count: 1)
                return counter
            }
            return deadLettered ? count(&tallies.deadLetters) : count(&tallies.rejections)
        }
        counter.increment()
    }

    /// Readiness and poll age, read when `/metrics` is scraped.
    public func refresh(from health: WorkerHealth) {
        ready.set(to: health.ready.ok ? 1 : 0)
        if let age = health.pollAge {
            pollAge.set(to: age.seconds)
        }
    }

    public func countPurchase(_ outcome: String) {
        purchaseCounters[outcome]?.increment()
        purchaseTallies.withLock { $0[outcome, default: 0] += 1 }
    }

    /// Purchase messages counted so far, by outcome.
    public var purchaseCounts: [String: Int] { purchaseTallies.withLock { $0 } }

    /// Gamebase calls counted so far, by `api` and `result` (keys `api/result`).
    public var gamebaseCounts: [String: Int] {
        let tallies = gamebaseTallies.withLock { $0 }
        return Dictionary(tallies.map { ("\($0.key.api)/\($0.key.result)", $0.value) }, uniquingKeysWith: +)
    }

    /// From message timestamp to outcome.
    public func recordPurchaseDuration(_ duration: Duration) {
        purchaseDuration.record(max(.zero, duration))
    }

    /// A `GamebaseRequestObserver` feeding `iap_gamebase_requests_total` and the duration histogram.
    public func recordGamebase(api: String, result: String, seconds: Double) {
        let counter = gamebaseCounters.withLock { counters in
            let key = GamebaseCall(api: api, result: result)
            if let counter = counters[key] { return counter }
            let counter = registry.makeCounter(
                descriptor: Self.describe(Name.gamebaseRequests, "Gamebase API calls by API and result"),
                labels: [("api", api), ("result", result)])
            counters[key] = counter
            return counter
        }
        counter.increment()
        gamebaseTallies.withLock { $0[GamebaseCall(api: api, result: result), default: 0] += 1 }
        let histogram = gamebaseHistograms.withLock { histograms in
            if let histogram = histograms[api] { return histogram }
            let histogram = registry.makeDurationHistogram(
                descriptor: Self.describe(Name.gamebaseDuration, "Gamebase API call latency"), labels: [("api", api)],
                buckets: Self.latencyBuckets)
            histograms[api] = histogram
            return histogram
        }
        histogram.record(.nanoseconds(Int64(seconds * 1e9)))
    }

    /// Reports lag for these partitions from now on (an assignment).
    public func trackLag(of partitions: [SourcePartition]) {
        lagPartitions.withLock { tracked in
            for partition in partitions { tracked.insert("\(partition.topic)|\(partition.partition)") }
        }
    }

    /// Stops reporting lag for these partitions and removes their gauges (a revoke or a loss): summed across
    /// instances, a revoked partition's last value would count twice.
    public func untrackLag(of partitions: [SourcePartition]) {
        let removed = lagGauges.withLock { gauges in
            lagPartitions.withLock { tracked in
                partitions.compactMap { partition -> Gauge? in
                    let key = "\(partition.topic)|\(partition.partition)"
                    tracked.remove(key)
                    readable.withLock { _ = $0.lag.removeValue(forKey: key) }
                    return gauges.removeValue(forKey: key)
                }
            }
        }
        for gauge in removed { registry.unregisterGauge(gauge) }
    }

    public func setConsumerLag(topic: String, partition: Int32, lag: Int64) {
        let gauge = lagGauges.withLock { gauges -> Gauge? in
            let key = "\(topic)|\(partition)"
            guard lagPartitions.withLock({ $0.contains(key) }) else { return nil }
            if let gauge = gauges[key] { return gauge }
            let gauge = registry.makeGauge(
                descriptor: Self.describe(
                    Name.consumerLag, "Messages behind the partition end (librdkafka statistics)"),
                labels: [("topic", topic), ("partition", String(partition))])
            gauges[key] = gauge
            return gauge
        }
        gauge?.set(to: Double(lag))
        if gauge != nil {
            readable.withLock {
                $0.lag["\(topic)|\(partition)"] = WorkerStatus.PartitionLag(
                    topic: topic, partition: partition, lag: lag)
            }
        }
    }

    /// The Prometheus text exposition.
    public func exposition() -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(8_192)
        registry.emit(into: &buffer)
        return buffer
    }
}

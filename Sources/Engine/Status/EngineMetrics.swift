import Fulfilment

/// What the engine and its services count and measure (DESIGN §7). The composition root gives the Prometheus registry
/// behind `/metrics`; tests give a recorder. Label values are the low-cardinality ones the names below document.
public protocol EngineMetrics: Sendable {
    /// A purchase message's outcome (`iap_purchases_total{outcome}`, ``PurchaseOutcome/countedLabels``).
    func countPurchase(_ outcome: String)
    /// From the message's timestamp to its outcome (`iap_purchase_duration_seconds`).
    func recordPurchaseDuration(_ duration: Duration)
    /// A rejection (`iap_rejections_total{reason}`) or a dead letter (`iap_dead_letters_total{reason}`).
    func countReason(_ reason: String, deadLettered: Bool)
    /// Purchases being processed (`iap_in_flight`).
    func setInFlight(_ count: Int)

    /// Grants waiting for Consume (`iap_unconsumed_grants`).
    func setUnconsumedGrants(_ count: Int)
    /// The age of the oldest of them, 0 when none (`iap_oldest_unconsumed_grant_age_seconds`).
    func setOldestUnconsumedGrantAge(_ seconds: Double)
    /// Grants set aside: revoked by a refund, and Gamebase refused their Consume for good (`iap_set_aside_grants`).
    func setSetAsideGrants(_ count: Int)

    /// `iap_circuit_open`.
    func setCircuitOpen(_ open: Bool)
    /// `iap_stopped`: consumption stopped by a configuration failure.
    func setStopped(_ stopped: Bool)
    /// `iap_ledger_unavailable`.
    func setLedgerUnavailable(_ unavailable: Bool)
    /// `iap_ledger_writable`: 0 while the ledger answers but cannot write (a full or read-only disk, an I/O error, a
    /// read-only server, a disk below `ledger.min_free_bytes`).
    func setLedgerWritable(_ writable: Bool)
    /// The wall clock stepped against the monotonic one (`iap_wall_clock_steps_total{direction}`: forward, back).
    func countWallClockStep(forward: Bool)

    /// Reports lag for these partitions from now on (an assignment).
    func trackLag(of partitions: [SourcePartition])
    /// Stops reporting lag for these partitions (a revoke or a loss).
    func untrackLag(of partitions: [SourcePartition])

    /// Payments a reconciliation pass handled (`iap_reconciled_total{outcome}`).
    func countReconciled(_ outcome: String, by count: Int)
    /// A reconciliation pass ended before checking every due user (`iap_reconcile_overruns_total`).
    func countReconcileOverrun()
    /// A reconciliation pass ended: its duration (`iap_reconcile_duration_seconds`) and, for the status, its summary.
    func recordReconcilePass(_ duration: Duration, summary: WorkerStatus.ReconcilePass)

    /// Rows by ledger table (`iap_ledger_rows{table}`).
    func setLedgerRows(_ counts: [String: Int])
    /// Rows retention deleted (`iap_ledger_pruned_rows_total{table}`).
    func countPruned(table: String, by count: Int)
    /// A store notification taken in (`iap_store_notifications_total{store,type,result}`): `type` is its kind
    /// (`unknown` when refused), `result` its outcome, `duplicate`, or `refused_<code>`.
    func countStoreNotification(store: String, type: String, result: String)
    /// A background service stopped while the worker goes on, or runs (`iap_service_stopped{service}`: 1 or 0).
    func setServiceStopped(service: String, stopped: Bool)
    /// A grant revoked (`iap_revocations_total{store,reason}`).
    func countRevocation(store: String, reason: String)
    /// A pass of a store's history poller read every window it read to its end
    /// (`iap_store_poll_last_complete_timestamp_seconds{store}`).
    func setStorePollCompleted(store: String, at secondsSinceEpoch: Double)
    /// An attempt at answering a consumption request (`iap_consumption_answers_total{result}`: answered, retried,
    /// gave_up).
    func countConsumptionAnswer(_ result: String)
    /// Seconds left before the nearest deadline of a consumption request not answered yet, read from the ledger after
    /// each pass (`iap_consumption_request_deadline_seconds`; ``ConsumptionAnswerer/nothingPending`` when none waits).
    func setConsumptionDeadline(secondsLeft: Double)
    /// A store poller's pass (`iap_store_polls_total{store,result}`): `complete` (every window it read was read to its
    /// end), `incomplete` (one has more than a pass reads), or, for each reading that failed, its error code (an
    /// ``AppStoreError`` code, or `ledger`).
    func countStorePoll(store: String, result: String)

    /// When pruning last caught up, seconds since the epoch; 0 while pruning is off
    /// (`iap_ledger_prune_caught_up_timestamp_seconds`).
    func setLedgerPruneCaughtUp(_ secondsSinceEpoch: Double)
}

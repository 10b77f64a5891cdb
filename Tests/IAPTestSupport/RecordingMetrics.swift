import Engine
import Fulfilment
import Synchronization

/// The engine's metrics kept in memory, for tests that look at what was counted.
public final class RecordingMetrics: EngineMetrics {
    public struct Values: Sendable {
        public var purchases: [String: Int] = [:]
        public var rejections: [String: Int] = [:]
        public var deadLetters: [String: Int] = [:]
        public var inFlight = 0
        public var unconsumedGrants: Int?
        public var setAsideGrants: Int?
        public var oldestUnconsumedGrantAge: Double?
        public var circuitOpen = false
        public var stopped = false
        public var ledgerUnavailable = false
        public var ledgerWritable = true
        public var lagPartitions: Set<SourcePartition> = []
        public var reconciled: [String: Int] = [:]
        public var reconcileOverruns = 0
        /// Wall-clock steps seen: `true` forward.
        public var wallClockSteps: [Bool] = []
        public var reconcilePasses: [WorkerStatus.ReconcilePass] = []
        public var ledgerRows: [String: Int] = [:]
        public var pruned: [String: Int] = [:]
        public var pruneCaughtUp: Double?
        public var purchaseDurations = 0
        /// `store/type/result` → count.
        public var storeNotifications: [String: Int] = [:]
        /// `store/reason` → count.
        public var revocations: [String: Int] = [:]
        /// `iap_store_poll_last_complete_timestamp_seconds{store="apple"}`.
        public var applePollSucceededAt: Double?
        /// `iap_store_polls_total{store="apple",result}` of the failed readings, by result (an error code).
        public var applePollFailures: [String: Int] = [:]
        /// `iap_store_polls_total{store,result}`, keyed `store/result`.
        public var storePolls: [String: Int] = [:]
        /// `iap_service_stopped{service}`.
        public var servicesStopped: [String: Bool] = [:]
        public var consumptionAnswers: [String: Int] = [:]
        public var consumptionDeadline: Double?
    }
    private let state = Mutex(Values())

    public init() {}

    public var values: Values { state.withLock { $0 } }

    public func countPurchase(_ outcome: String) { state.withLock { $0.purchases[outcome, default: 0] += 1 } }
    public func recordPurchaseDuration(_ duration: Duration) { state.withLock { $0.purchaseDurations += 1 } }
    public func countReason(_ reason: String, deadLettered: Bool) {
        state.withLock {
            if deadLettered { $0.deadLetters[reason, default: 0] += 1 } else { $0.rejections[reason, default: 0] += 1 }
        }
    }
    public func setInFlight(_ count: Int) { state.withLock { $0.inFlight = count } }
    public func setUnconsumedGrants(_ count: Int) { state.withLock { $0.unconsumedGrants = count } }
    public func setSetAsideGrants(_ count: Int) { state.withLock { $0.setAsideGrants = count } }
    public func setOldestUnconsumedGrantAge(_ seconds: Double) {
        state.withLock { $0.oldestUnconsumedGrantAge = seconds }
    }
    public func setCircuitOpen(_ open: Bool) { state.withLock { $0.circuitOpen = open } }
    public func setStopped(_ stopped: Bool) { state.withLock { $0.stopped = stopped } }
    public func setLedgerUnavailable(_ unavailable: Bool) { state.withLock { $0.ledgerUnavailable = unavailable } }
    public func setLedgerWritable(_ writable: Bool) { state.withLock { $0.ledgerWritable = writable } }
    public func trackLag(of partitions: [SourcePartition]) { state.withLock { $0.lagPartitions.formUnion(partitions) } }
    public func untrackLag(of partitions: [SourcePartition]) {
        state.withLock { $0.lagPartitions.subtract(partitions) }
    }
    public func countReconciled(_ outcome: String, by count: Int) {
        state.withLock { $0.reconciled[outcome, default: 0] += count }
    }
    public func countReconcileOverrun() { state.withLock { $0.reconcileOverruns += 1 } }
    public func countWallClockStep(forward: Bool) { state.withLock { $0.wallClockSteps.append(forward) } }
    public func recordReconcilePass(_ duration: Duration, summary: WorkerStatus.ReconcilePass) {
        state.withLock { $0.reconcilePasses.append(summary) }
    }
    public func countStoreNotification(store: String, type: String, result: String) {
        state.withLock { $0.storeNotifications["\(store)/\(type)/\(result)", default: 0] += 1 }
    }
    public func countRevocation(store: String, reason: String) {
        state.withLock { $0.revocations["\(store)/\(reason)", default: 0] += 1 }
    }
    public func setStorePollCompleted(store: String, at secondsSinceEpoch: Double) {
        if store == "apple" { state.withLock { $0.applePollSucceededAt = secondsSinceEpoch } }
    }
    public func setServiceStopped(service: String, stopped: Bool) {
        state.withLock { $0.servicesStopped[service] = stopped }
    }
    public func countStorePoll(store: String, result: String) {
        state.withLock {
            $0.storePolls["\(store)/\(result)", default: 0] += 1
            if store == "apple", result != "complete", result != "incomplete" {
                $0.applePollFailures[result, default: 0] += 1
            }
        }
    }
    public func countConsumptionAnswer(_ result: String) {
        state.withLock { $0.consumptionAnswers[result, default: 0] += 1 }
    }
    public func setConsumptionDeadline(secondsLeft: Double) { state.withLock { $0.consumptionDeadline = secondsLeft } }
    public func setLedgerRows(_ counts: [String: Int]) { state.withLock { $0.ledgerRows = counts } }
    public func countPruned(table: String, by count: Int) { state.withLock { $0.pruned[table, default: 0] += count } }
    public func setLedgerPruneCaughtUp(_ secondsSinceEpoch: Double) {
        state.withLock { $0.pruneCaughtUp = secondsSinceEpoch }
    }
}

import Engine
import Foundation
import Fulfilment

/// The worker's status as the console shows it (``WorkerStatus``): read from the same ``WorkerHealth`` that answers
/// `/readyz` and `/healthz` and the same ``WorkerMetrics`` that `/metrics` exposes, never from the engine's internals.
struct WorkerStatusReport: WorkerStatusSource {
    let metrics: WorkerMetrics
    let health: WorkerHealth
    let instance: String
    let reconciliationEnabled: Bool
    let settings: [WorkerStatus.Setting]

    init(configuration: WorkerConfiguration, metrics: WorkerMetrics, health: WorkerHealth, instance: String) {
        self.metrics = metrics
        self.health = health
        self.instance = instance
        reconciliationEnabled = configuration.reconcile.isEnabled
        // What `check-config` prints, secrets redacted.
        settings = configuration.displayed.map { WorkerStatus.Setting($0.key, $0.value) }
    }

    func workerStatus() -> WorkerStatus {
        let ready = health.ready
        let live = health.live
        let facts = health.facts
        let (purchases, rejections, deadLetters, inFlight, readable) = metrics.snapshot
        return WorkerStatus(
            version: WorkerMetrics.version, instance: instance, ready: ready.ok, readiness: ready.detail, live: live.ok,
            liveness: live.detail, circuitOpen: facts.circuitOpen, ledgerReachable: facts.ledgerReachable,
            stoppedBy: facts.stoppedReason, inFlight: inFlight,
            consumerLag: readable.lag.values.sorted { ($0.topic, $0.partition) < ($1.topic, $1.partition) },
            unconsumedGrants: readable.unconsumedGrants,
            oldestUnconsumedGrantAgeSeconds: readable.oldestUnconsumedGrantAge, outcomes: purchases,
            rejections: rejections, deadLetters: deadLetters,
            reconciliationEnabled: reconciliationEnabled, lastReconcilePass: readable.lastReconcilePass,
            settings: settings, setAsideGrants: readable.setAsideGrants)
    }
}

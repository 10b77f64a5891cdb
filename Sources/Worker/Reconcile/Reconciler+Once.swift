import Foundation
import Fulfilment
import Gamebase
import Kafka
import Logging

extension Reconciler {
    /// `iap-worker reconcile`: one pass with the worker's configuration, outside the daemon. It checks the users it
    /// is given, or every user of the lookback window (whether or not a daemon claimed them for this interval), and
    /// keeps the shared grace: a payment first seen now is recorded, not taken. Its events go to the worker's
    /// topics; a dry run needs no Kafka at all.
    ///
    /// - Throws: what building the Kafka producer throws; the pass itself reports its failures.
    public static func runOnce(
        configuration: WorkerConfiguration, ledger: any LedgerStore, gamebase: any GamebaseAPI, users: [String]?,
        dryRun: Bool, metrics: WorkerMetrics = WorkerMetrics(), logger: Logger
    ) async throws -> ReconcilePass.Report {
        let producer =
            dryRun ? nil : try KafkaProducer(configuration: configuration.producerConfiguration, logger: logger)
        let publisher: any EventPublisher = producer.map { KafkaEventPublisher(producer: $0) } ?? RefusingPublisher()
        let processor = PurchaseProcessor(
            gamebase: gamebase, ledger: ledger, publisher: publisher,
            configuration: FulfilmentConfiguration(
                groupID: configuration.groupID, itemGrantedTopic: configuration.topics.itemGranted,
                consumeFailedTopic: configuration.topics.consumeFailed,
                deadLetterTopic: configuration.topics.deadLetter,
                workerName: "iap-worker reconcile", rejectTestPurchases: configuration.rejectTestPurchases,
                maxMessageBytes: configuration.maxMessageBytes, verifyRetry: configuration.retry,
                consumeRetry: configuration.retry),
            logger: logger)
        let pass = ReconcilePass(
            processor: processor, configuration: configuration.reconcile,
            health: StandaloneReconcileHealth(gamebase: gamebase),
            metrics: metrics, logger: logger)
        let report = await pass.run(ReconcilePass.Options(users: users, dryRun: dryRun, claim: false))
        await producer?.close()
        return report
    }
}

/// A dry run's publisher: a dry run decides nothing, so nothing may be published.
struct RefusingPublisher: EventPublisher {
    struct DryRun: Error, CustomStringConvertible {
        var description: String { "a dry run publishes nothing" }
    }

    func publish(_ record: OutboundRecord) async throws { throw DryRun() }
}

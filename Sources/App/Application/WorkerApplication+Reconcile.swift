import Engine
import Foundation
import Fulfilment
import Gamebase
import Kafka
import Logging

extension WorkerApplication {
    /// `iap-worker reconcile`: one pass with the worker's configuration, outside the daemon. It checks the users it
    /// is given, or every user of the lookback window (whether or not a daemon claimed them for this interval), and
    /// keeps the shared grace: a payment first seen now is recorded, not taken. Its events go to the worker's
    /// topics; a dry run needs no Kafka at all.
    ///
    /// - Throws: what building the Kafka producer throws; the pass itself reports its failures.
    public static func reconcileOnce(
        configuration: WorkerConfiguration, ledger: LedgerRoles, gamebase: any GamebaseAPI, users: [String]?,
        dryRun: Bool, metrics: WorkerMetrics = WorkerMetrics(), logger: Logger
    ) async throws -> ReconcilePass.Report {
        let producer =
            dryRun ? nil : try KafkaProducer(configuration: configuration.producerConfiguration, logger: logger)
        let publisher: any EventPublisher = producer.map { KafkaEventPublisher(producer: $0) } ?? RefusingPublisher()
        let processor = PurchaseProcessor(
            gamebase: gamebase, ledger: ledger.purchases,
            ledgerDeadline: LedgerDeadline(configuration.ledgerCallTimeout),
            publisher: publisher,
            configuration: configuration.fulfilmentConfiguration(workerName: "iap-worker reconcile"),
            logger: logger)
        let pass = ReconcilePass(
            processor: processor, ledger: ledger.reconciliation, configuration: configuration.reconcile,
            health: StandaloneReconcileHealth(gamebase: gamebase), metrics: metrics, logger: logger)
        let report = await pass.run(ReconcilePass.Options(users: users, dryRun: dryRun, claim: false))
        await producer?.close()
        return report
    }

    /// `iap-worker reprocess`: re-drives the dead-letter topic's records through the flow (``Reprocessor``), reading
    /// it with a consumer group of its own (`<kafka.group_id>.reprocess`, plus the reason when filtered).
    ///
    /// - Parameter idle: the run stops when no record arrives for this long although the end offsets are not reached
    ///   (a partition owned by another run, or offsets that are gaps).
    public static func reprocess(
        configuration: WorkerConfiguration, ledger: LedgerRoles, gamebase: any GamebaseAPI,
        options: Reprocessor.Options, idle: Duration = .seconds(30), logger: Logger
    ) async throws -> Reprocessor.Report {
        var reading = configuration
        reading.groupID = Reprocessor.groupID(base: configuration.groupID, reason: options.reason)
        let consumer = try KafkaConsumer(configuration: reading.consumerConfiguration, logger: logger)
        let producer: KafkaProducer
        do {
            producer = try KafkaProducer(configuration: configuration.producerConfiguration, logger: logger)
        } catch {
            await consumer.close()
            throw error
        }
        let processor = PurchaseProcessor(
            gamebase: gamebase, ledger: ledger.purchases,
            ledgerDeadline: LedgerDeadline(configuration.ledgerCallTimeout),
            publisher: KafkaEventPublisher(producer: producer),
            configuration: configuration.fulfilmentConfiguration(workerName: "iap-worker reprocess"), logger: logger)
        let reprocessor = Reprocessor(
            source: KafkaDeadLetterSource(consumer: consumer, topic: configuration.topics.deadLetter, idle: idle),
            processor: processor, admin: ledger.admin, logger: logger)
        do {
            let report = try await reprocessor.run(options)
            await producer.close()
            return report
        } catch {
            await producer.close()
            throw error
        }
    }
}

/// A dry run's publisher: a dry run decides nothing, so nothing may be published.
struct RefusingPublisher: EventPublisher {
    struct DryRun: Error, CustomStringConvertible {
        var description: String { "a dry run publishes nothing" }
    }

    func publish(_ record: OutboundRecord) async throws { throw DryRun() }
}

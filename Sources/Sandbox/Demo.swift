import App
import Console
import Engine
import Foundation
import Fulfilment
import Gamebase
import GamebaseHTTP
import GamebaseSimulator
import GooglePlaySimulator
import Kafka
import KafkaTesting
import Ledger
import Logging
import ServiceLifecycle
import UnixSignals

/// `iap-dev demo`: the real worker engine on a mixed batch in a sandbox, then a summary.
public enum Demo {
    public struct Options: Sendable {
        /// Valid purchases in the batch.
        public var purchases: Int
        /// Keep the worker, `/metrics` and the sandbox up after the summary, until SIGINT/SIGTERM.
        public var keepRunning: Bool
        /// Port of `/metrics`, `/healthz`, `/readyz` (0: any free port).
        public var port: Int
        /// Share of Gamebase calls failing transiently during the burst at the start.
        public var faultRate: Double
        /// Port of the operator console on 127.0.0.1 (0: off).
        public var consolePort: Int

        public init(
            purchases: Int = 50, keepRunning: Bool = false, port: Int = 8080, faultRate: Double = 0.2,
            consolePort: Int = 0
        ) {
            self.purchases = purchases
            self.keepRunning = keepRunning
            self.port = port
            self.faultRate = faultRate
            self.consolePort = consolePort
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Runs the demo and returns its report; `say` receives progress lines and, at the end, the summary.
    public static func run(_ options: Options, logger: Logger, say: @escaping @Sendable (String) -> Void) async throws
        -> DemoReport
    {
        let batch = DemoBatch(purchases: options.purchases)
        let started = ContinuousClock.now
        let play = try await DemoGooglePlay.start(logger: logger)
        defer { play.stop() }
        return try await Sandbox.with(payments: batch.payments, logger: logger) { sandbox in
            say(
                "Sandbox: mock Kafka at \(sandbox.cluster.bootstrapServers), Gamebase simulator at \(sandbox.simulatorURL),"
            )
            say("         SQLite ledger at \(sandbox.ledgerURL)")
            try await sandbox.produce(batch.records, logger: logger)
            say(
                "Fed \(batch.records.count) messages to purchase.completed; starting the worker (joining the group takes a few seconds)…"
            )

            let configuration = {
                var configuration = sandbox.workerConfiguration(groupID: "iap-worker-demo")
                configuration.serverPort = options.port
                configuration.console = ConsoleConfiguration(port: options.consolePort, environment: "demo")
                // Seconds, not the production minutes, so the demo shows a paid-but-unreported purchase found.
                configuration.reconcile = Reconciler.Configuration(
                    interval: .seconds(2), grace: .seconds(3), lookback: .seconds(3_600), maxCallsPerSecond: 50)
                // Google's refunds: the granted purchase voided through the Voided Purchases API (the Google Play
                // simulator, read every second), a payment never seen through RTDN on the store-notifications topic.
                configuration.refunds.googlePackageName = DemoBatch.packageName
                configuration.refunds.googleAccount = play.account
                configuration.refunds.googleBaseURL = play.url
                configuration.refunds.googlePollInterval = .seconds(1)
                return configuration
            }()
            return try await LedgerStores.withStore(url: configuration.ledgerURL, logger: logger) { store in
                let ledger = store.roles
                let metrics = WorkerMetrics()
                let gamebase = GamebaseClient(
                    configuration: configuration.gamebaseConfiguration, logger: logger,
                    observer: { metrics.recordGamebase(api: $0, result: $1, seconds: $2) })
                let (group, parts) = try WorkerApplication.buildServiceGroup(
                    configuration: configuration, ledger: ledger, gamebase: gamebase, signals: false, metrics: metrics,
                    adminHost: "127.0.0.1", logger: logger)
                return try await withThrowingTaskGroup(of: DemoReport?.self) { tasks in
                    tasks.addTask {
                        try await group.run()
                        return nil
                    }
                    do {
                        let report = try await observe(
                            batch: batch, sandbox: sandbox, play: play, parts: parts, ledger: ledger,
                            options: options, started: started,
                            logger: logger)
                        say("")
                        say(report.rendered)
                        if options.keepRunning {
                            say("")
                            say(
                                keepRunningHelp(
                                    sandbox: sandbox, port: parts.admin.listeningPort ?? options.port,
                                    consolePort: parts.console?.listeningPort))
                            for await _ in await UnixSignalsSequence(trapping: .sigint, .sigterm) { break }
                            say("Stopping.")
                        }
                        await group.triggerGracefulShutdown()
                        try await tasks.waitForAll()
                        return report
                    } catch {
                        await group.triggerGracefulShutdown()
                        try? await tasks.waitForAll()
                        throw error
                    }
                }
            }
        }
    }

    /// Injects the fault burst, waits until every message has an outcome and every grant is consumed, then
    /// reads the output topics and the ledger.
    static func observe(
        batch: DemoBatch, sandbox: Sandbox, play: DemoGooglePlay, parts: WorkerApplication.Parts, ledger: LedgerRoles,
        options: Options, started: ContinuousClock.Instant, logger: Logger
    ) async throws -> DemoReport {
        let fed = batch.records.count
        var faults = sandbox.simulator.state.faults
        faults.faultRate = options.faultRate
        sandbox.simulator.state.faults = faults
        var burstOver = false
        let deadline = ContinuousClock.now + .seconds(90 + fed / 20)
        while parts.metrics.purchaseCounts.values.reduce(0, +) < fed {
            guard ContinuousClock.now < deadline else {
                throw Failure(
                    description: "the worker did not finish the batch in time: \(parts.metrics.purchaseCounts)")
            }
            // The burst lasts until a third of the purchases are granted.
            if !burstOver, (parts.metrics.purchaseCounts["granted"] ?? 0) * 3 >= batch.expectedGrants {
                faults.faultRate = 0
                sandbox.simulator.state.faults = faults
                burstOver = true
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        faults.faultRate = 0
        sandbox.simulator.state.faults = faults
        // The paid-but-unreported purchase: a pass sees it, its grace passes, the next pass grants it.
        let reconcileDeadline = ContinuousClock.now + .seconds(60)
        while (parts.metrics.reconciledCounts["granted"] ?? 0) < 1 {
            guard ContinuousClock.now < reconcileDeadline else {
                let counts = parts.metrics.reconciledCounts
                throw Failure(description: "the reconciler did not find the unreported purchase: \(counts)")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        // Consumes that failed after their grant are finished by the sweeper.
        var stats = try await ledger.admin.stats()
        let sweepDeadline = ContinuousClock.now + .seconds(30)
        while stats.granted > 0 || stats.unpublishedEvents > 0, ContinuousClock.now < sweepDeadline {
            try await Task.sleep(for: .milliseconds(200))
            stats = try await ledger.admin.stats()
        }
        let refunds = try await refund(sandbox: sandbox, play: play, ledger: ledger, logger: logger)
        stats = try await ledger.admin.stats()
        let elapsed = ContinuousClock.now - started
        let records = try await KafkaConsumer.readWhole(
            ["iap.item-granted", "iap.consume-failed", "purchase.completed.dlq", "iap.item-revoked"],
            bootstrapServers: sandbox.cluster.bootstrapServers, logger: logger, quiet: .seconds(1))
        return DemoReport(
            batch: batch, outcomes: parts.metrics.purchaseCounts, gamebaseCalls: parts.metrics.gamebaseCounts,
            simulatorConsumes: sandbox.simulator.state.consumes, ledger: stats, records: records,
            reconciled: parts.metrics.reconciledCounts, refunds: refunds, elapsed: elapsed)
    }

    /// The store refunds a granted purchase (voided at the Google Play simulator, read by the worker's poller) and a
    /// payment the ledger never saw (its RTDN on the store-notifications topic): waits until the first is revoked (its
    /// event published) and the second kept pending.
    static func refund(sandbox: Sandbox, play: DemoGooglePlay, ledger: LedgerRoles, logger: Logger) async throws
        -> DemoReport.Refunds
    {
        let now = Int64(Date().timeIntervalSince1970 * 1_000)
        play.state.add(
            .init(
                orderId: "GPA.\(DemoBatch.refunded)", purchaseToken: "refund-token-GPA.\(DemoBatch.refunded)",
                voidedTime: Date()))
        try await sandbox.produce(
            [
                KafkaProducerRecord(
                    topic: sandbox.topicNames.storeNotifications, key: Array("refunds".utf8),
                    value: Array(DemoBatch.voided(DemoBatch.refundedUnseen, at: now).utf8))
            ], logger: logger)
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let revocation = try await ledger.refunds.revocation(paymentSeq: DemoBatch.refunded)
            let unseen = try await ledger.refunds.notifications(
                paymentKey: StorePaymentKey(marketId: "GG", paymentId: DemoBatch.refundedUnseen))
            let unpublished = try await ledger.admin.stats().unpublishedEvents
            if let revocation, unseen.first?.outcome == .pending, unpublished == 0 {
                return DemoReport.Refunds(revocation: revocation, unseenPending: true)
            }
            guard ContinuousClock.now < deadline else {
                throw Failure(description: "the demo's refunds were not taken in within 60 s")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    static func keepRunningHelp(sandbox: Sandbox, port: Int, consolePort: Int?) -> String {
        let console =
            consolePort.map {
                "The operator console: http://127.0.0.1:\($0)/ (open it in a browser; Refunds shows the demo's refunds)\n"
            } ?? ""
        return """
            \(console)Still running (Ctrl-C stops it). Try, in another terminal:
              curl -s http://127.0.0.1:\(port)/metrics | grep ^iap_
              curl -s http://127.0.0.1:\(port)/readyz
              iap-worker ledger show demo-0 --url \(sandbox.ledgerURL)
              KAFKA_BOOTSTRAP_SERVERS=\(sandbox.cluster.bootstrapServers) GAMEBASE_BASE_URL=\(sandbox.simulatorURL) \\
                GAMEBASE_APP_ID=\(Sandbox.appID) GAMEBASE_SECRET_KEY=\(Sandbox.secretKey) LEDGER_URL=\(sandbox.ledgerURL) \\
                iap-worker reprocess --dry-run
              (the same variables) iap-worker reconcile --dry-run --user \(DemoBatch.unreported.userId)
            """
    }
}

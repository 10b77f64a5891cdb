import App
import ArgumentParser
import Engine
import Foundation
import Fulfilment
import Gamebase
import GamebaseHTTP
import Ledger
import Logging
import Wire

struct ReconcileCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reconcile",
        abstract: "One reconciliation pass through Gamebase's List Consumables, then exits.",
        discussion: """
            Lists the unconsumed payments of the given users (--user, repeatable), or of every user with a grant or a \
            confirmed rejection within reconcile.lookback_hours, and runs each payment the ledger has neither granted \
            nor rejected through the consume flow, once it has stayed unconsumed for reconcile.grace_ms since a pass \
            first saw it (a payment seen for the first time is recorded, and left unless reconcile.grace_ms is 0: run it again after the grace). \
            At most reconcile.max_calls_per_second Gamebase calls. Logs each grant as it makes it (standard error), \
            then prints one line per payment and a summary. \
            Exits 0 when the pass ran, also when it stops early because Gamebase does not answer (run it again \
            later); 1 when Gamebase rejects the configuration; 2 when the ledger or Kafka failed and ended the pass \
            (what it granted stands: the worker's sweeper publishes and consumes it; run it again).
            """
    )

    @Option(name: .customLong("config"), help: "YAML configuration file (default: $IAP_WORKER_CONFIG).")
    var configFile: String?
    @Option(
        name: .customLong("user"), help: "A userId to check (repeatable); default: the users of the lookback window.")
    var users: [String] = []
    @Flag(name: .customLong("dry-run"), help: "Show what a pass would do; grant, record and publish nothing.")
    var dryRun = false

    func validate() throws {
        if users.contains(where: { $0.isEmpty }) { throw ValidationError("--user must not be empty") }
    }

    func run() async throws {
        let configuration = try await WorkerConfiguration.load(configFile: configFile)
        // Notice: each grant's log line is the record of it as it happens, even if the pass is cut short.
        LoggingSetup.bootstrap(format: .text, level: .notice)
        let logger = Logger(label: "iap-worker.reconcile")
        let users = users.isEmpty ? nil : users
        let dryRun = dryRun
        let report = try await LedgerStores.withStore(url: configuration.ledgerURL, logger: logger) { ledger in
            let gamebase = GamebaseClient(configuration: configuration.gamebaseConfiguration, logger: logger)
            do {
                // Every ledger call under the daemon's deadline: a ledger that does not answer ends the pass (exit 2).
                let report = try await WorkerApplication.reconcileOnce(
                    configuration: configuration, ledger: ledger.roles, gamebase: gamebase, users: users,
                    dryRun: dryRun, logger: logger)
                try? await gamebase.shutdown()
                return report
            } catch {
                try? await gamebase.shutdown()
                throw error
            }
        }
        print(Self.describe(report, configuration: configuration.reconcile, users: users, dryRun: dryRun))
        if report.configurationRejected { throw ExitCode(1) }
        if report.dependencyFailed { throw ExitCode(2) }
    }

    static func describe(
        _ report: ReconcilePass.Report, configuration: Reconciler.Configuration, users: [String]?, dryRun: Bool
    ) -> String {
        var lines: [String] = []
        let whom =
            users.map { "\($0.count) given user(s)" }
            ?? "the users of the last \(configuration.lookback.components.seconds / 3_600) hours"
        lines.append(
            (dryRun ? "dry run: nothing granted, recorded or published; " : "")
                + "\(report.usersChecked) user(s) checked of \(whom), \(report.payments) unconsumed payment(s) listed")
        if !report.findings.isEmpty {
            lines.append(
                "  " + "user".padding(toLength: 24, withPad: " ", startingAt: 0)
                    + "paymentSeq".padding(toLength: 24, withPad: " ", startingAt: 0)
                    + "outcome".padding(toLength: 18, withPad: " ", startingAt: 0) + "detail")
            for finding in report.findings {
                lines.append(
                    "  " + finding.userId.padding(toLength: 24, withPad: " ", startingAt: 0)
                        + (finding.paymentSeq ?? "-").padding(toLength: 24, withPad: " ", startingAt: 0)
                        + finding.outcome.rawValue.padding(toLength: 18, withPad: " ", startingAt: 0) + finding.detail)
            }
        }
        if !report.outcomes.isEmpty {
            lines.append(
                "summary: "
                    + report.outcomes.sorted { $0.key < $1.key }.map { "\($0.key.rawValue) \($0.value)" }.joined(
                        separator: ", "))
        }
        if let stopped = report.stoppedEarly { lines.append("stopped early: \(stopped)") }
        return lines.joined(separator: "\n")
    }
}

import App
import ArgumentParser
import Engine
import Foundation
import Fulfilment
import Gamebase
import GamebaseHTTP
import Ledger
import Logging

struct ReprocessCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reprocess",
        abstract: "Re-drives dead-lettered messages through the consume flow, up to the topic's end when it started.",
        discussion: """
            Takes the dead-letter topic's end offsets first and stops there, so it always ends: a record that fails \
            again goes back to the dead-letter topic with its attempt count raised, for a later run. Reads with a \
            consumer group of its own (<kafka.group_id>.reprocess, plus the reason when --reason is given, so each \
            filter keeps its own progress); the flow is idempotent, so a record re-driven twice is granted once. \
            Stops early, committing what it finished, if Gamebase rejects the configuration (exit 1) or does not \
            answer (exit 0: run it again later). Prints what it did per dead-letter reason.
            """
    )

    @Option(name: .customLong("config"), help: "YAML configuration file (default: $IAP_WORKER_CONFIG).")
    var configFile: String?
    @Option(help: "Only records dead-lettered for this reason (iap-reason), e.g. gamebase_unavailable.")
    var reason: String?
    @Option(help: "Stop after this many records.")
    var limit: Int?
    @Flag(name: .customLong("dry-run"), help: "Show what would be re-driven; change and commit nothing.")
    var dryRun = false
    @Option(name: .customLong("idle-seconds"), help: "Give up waiting for records after this long without one.")
    var idleSeconds: Int = 30

    func validate() throws {
        if let limit, limit <= 0 { throw ValidationError("--limit must be positive") }
        if let reason, ConsumeFailureReason(rawValue: reason) == nil {
            throw ValidationError(
                "--reason must be one of \(ConsumeFailureReason.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard idleSeconds > 0 else { throw ValidationError("--idle-seconds must be positive") }
    }

    func run() async throws {
        let configuration = try await WorkerConfiguration.load(configFile: configFile)
        LoggingSetup.bootstrap(format: .text, level: .warning)
        let logger = Logger(label: "iap-worker.reprocess")
        let options = Reprocessor.Options(
            reason: reason, limit: limit, dryRun: dryRun,
            announce: { line in
                print(line)
                fflushStandardOutput()
            })
        let idle = Duration.seconds(idleSeconds)
        let report = try await LedgerStores.withStore(url: configuration.ledgerURL, logger: logger) { store in
            let gamebase = GamebaseClient(configuration: configuration.gamebaseConfiguration, logger: logger)
            // Every ledger call under the same deadline as the daemon's: a ledger that does not answer ends the run.
            do {
                let report = try await WorkerApplication.reprocess(
                    configuration: configuration, ledger: store.roles, gamebase: gamebase, options: options, idle: idle,
                    logger: logger)
                try? await gamebase.shutdown()
                return report
            } catch {
                try? await gamebase.shutdown()
                throw error
            }
        }
        print(Self.describe(report, topic: configuration.topics.deadLetter, dryRun: dryRun))
        if report.failed { throw ExitCode(1) }
    }

    static func describe(_ report: Reprocessor.Report, topic: String, dryRun: Bool) -> String {
        var lines: [String] = []
        let ends = report.endOffsets.sorted { $0.key < $1.key }.map { "[\($0.key)]=\($0.value)" }.joined(separator: " ")
        lines.append(
            (dryRun ? "dry run: nothing changed, nothing committed; " : "")
                + "\(report.handled) record(s) of \(topic) handled, up to the end offsets taken at the start (\(ends))")
        if report.skipped > 0 { lines.append("\(report.skipped) record(s) skipped by --reason") }
        if !report.outcomes.isEmpty {
            lines.append(
                "  " + "reason".padding(toLength: 24, withPad: " ", startingAt: 0)
                    + "outcome".padding(toLength: 22, withPad: " ", startingAt: 0) + "count")
            for (reason, outcomes) in report.outcomes.sorted(by: { $0.key < $1.key }) {
                for (outcome, count) in outcomes.sorted(by: { $0.key < $1.key }) {
                    lines.append(
                        "  " + reason.padding(toLength: 24, withPad: " ", startingAt: 0)
                            + outcome.padding(toLength: 22, withPad: " ", startingAt: 0) + "\(count)")
                }
            }
        }
        if let stopped = report.stoppedEarly { lines.append("stopped early: \(stopped)") }
        return lines.joined(separator: "\n")
    }
}

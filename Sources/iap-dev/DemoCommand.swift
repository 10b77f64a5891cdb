import App
import ArgumentParser
import Logging
import Sandbox

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Runs the worker on a mixed batch in a sandbox and prints what happened.",
        discussion: """
            Everything runs in this process and needs no configuration: librdkafka's mock cluster as Kafka, the \
            Gamebase simulator, and a SQLite ledger in a temporary folder. The batch holds valid purchases, \
            duplicates, a forged token, someone else's purchase, a subscription, a purchase consumed elsewhere and \
            malformed messages; Gamebase fails transiently for the first part of the run.
            """
    )

    @Option(help: "Valid purchases in the batch.") var purchases = 50
    @Flag(help: "Keep the worker and /metrics up after the summary, until Ctrl-C.") var keepRunning = false
    @Option(help: "Port of /metrics, /healthz and /readyz (default: 8080 with --keep-running, else any free port).")
    var port: Int?
    @Option(help: "Port of the operator console on 127.0.0.1 with --keep-running (default 8081; 0 turns it off).")
    var consolePort = 8081
    @Flag(help: "Show the worker's log lines (text, info level).") var verbose = false

    func validate() throws {
        guard (1...100_000).contains(purchases) else {
            throw ValidationError("--purchases must be between 1 and 100000")
        }
        guard (0...65_535).contains(consolePort) else { throw ValidationError("--console-port must be 0…65535") }
    }

    func run() async throws {
        LoggingSetup.bootstrap(format: .text, level: verbose ? .info : .error)
        let logger = Logger(label: "iap-worker.demo")
        let report = try await Demo.run(
            Demo.Options(
                purchases: purchases, keepRunning: keepRunning, port: port ?? (keepRunning ? 8080 : 0),
                consolePort: keepRunning ? consolePort : 0), logger: logger,
            say: { print($0) })
        if !report.invariantsHold { throw ExitCode(2) }
    }
}

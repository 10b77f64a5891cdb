import ArgumentParser
import Foundation
import Logging
import Sandbox

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract:
            "Benchmarks: the whole pipeline (default), the users' mix, a soak, the ledger's grant transaction, the ledger as it grows, the Gamebase client, or a purchase's floor.",
        subcommands: [
            BenchPipelineCommand.self, BenchMixedCommand.self, BenchSoakCommand.self, BenchLedgerCommand.self,
            BenchScaleCommand.self, BenchClientCommand.self, BenchFloorCommand.self,
        ],
        defaultSubcommand: BenchPipelineCommand.self
    )
}

/// `iap-dev bench [pipeline]`: throughput, end-to-end latency, CPU and memory of a worker under load.
struct BenchPipelineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pipeline",
        abstract:
            "Runs the worker as a separate process against Kafka (the mock cluster, or --bootstrap) and the Gamebase simulator.",
        discussion: """
            This process hosts librdkafka's mock cluster (or, with --bootstrap, uses a real Kafka cluster over TCP, \
            creating topics of its own there), the Gamebase simulator (with --latency-ms on every call) and the \
            producer; the worker is `iap-worker run` in its own process, so its CPU time and memory are its own. \
            Latency runs from each message's timestamp to its Consume at Gamebase.
            """
    )

    @Option(help: "Purchases to produce (default 20000, or 300 with --sequential).") var purchases: Int?
    @Option(help: "Simulated Gamebase latency per call, in milliseconds.") var latencyMs = 50
    @Option(help: "worker.max_in_flight of the worker.") var maxInFlight = 512
    @Option(help: "Purchases per second to offer (default: all at once).") var rate: Double?
    @Flag(help: "One purchase in flight: the baseline.") var sequential = false
    @Option(help: "Purchases run before the measured ones and not counted (default 100, or 10 with --sequential).")
    var warmup: Int?
    @Option(help: "ledger.url for the worker (default: SQLite in a temporary folder).") var ledgerURL: String?
    @Flag(help: "kill -9 the worker half way, restart it, and time until it resumes.") var killRestart = false
    @Option(help: "kafka.librdkafka.session.timeout.ms of the worker (default: the worker's own).")
    var sessionTimeoutMs: Int?
    @Option(help: "The iap-worker executable to run as the worker (default: the one beside iap-dev).") var worker:
        String?
    @Flag(help: "Serve the worker's console and ask for its overview every second while measuring.")
    var consoleRefresh = false
    @Flag(
        help:
            "Mix duplicates, rejected claims and malformed records among the purchases (16 messages per 10 purchases).")
    var mixed = false
    @Flag(
        help:
            "Count the worker's allocations per purchase with perf uprobes on libc (slows the worker: CPU figures not comparable)."
    )
    var countAllocations = false
    @Flag(help: "Print JSON instead of a table.") var json = false
    @Option(
        help:
            "A real Kafka cluster's bootstrap servers (host:port,…) instead of the in-process mock cluster; the run creates topics with a prefix of its own there and leaves them."
    )
    var bootstrap: String?

    func validate() throws {
        if let purchases, purchases < 1 { throw ValidationError("--purchases must be positive") }
        if let bootstrap, bootstrap.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("--bootstrap takes host:port[,host:port…]")
        }
        if let rate, rate <= 0 { throw ValidationError("--rate must be positive") }
        if let warmup, warmup < 0 { throw ValidationError("--warmup must not be negative") }
        guard maxInFlight >= 1 else { throw ValidationError("--max-in-flight must be positive") }
        if countAllocations, killRestart {
            throw ValidationError("--count-allocations counts one worker process: it does not go with --kill-restart")
        }
    }

    func run() async throws {
        var logger = Logger(label: "iap-worker.bench")
        logger.logLevel = .error
        var options = PipelineBenchmark.Options(workerExecutable: try Executables.worker(given: worker))
        options.purchases = purchases ?? (sequential ? 300 : 20_000)
        options.latencyMs = latencyMs
        options.maxInFlight = sequential ? 1 : maxInFlight
        options.rate = rate
        options.ledgerURL = ledgerURL
        options.killRestart = killRestart
        options.sessionTimeoutMs = sessionTimeoutMs
        options.consoleRefresh = consoleRefresh
        options.mixed = mixed
        options.countAllocations = countAllocations
        options.bootstrapServers = bootstrap
        options.warmup = warmup ?? (sequential ? 10 : 100)
        let json = self.json
        let result = try await PipelineBenchmark.run(options, logger: logger) { line in
            if !json { print(line) }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(result), as: UTF8.self))
        } else {
            print("")
            print(result.table)
        }
        if result.consumedTwice > 0 { throw ExitCode(2) }
    }
}

/// The logger a benchmark's own clients use: errors only, so the table or the JSON is what the command prints.
func benchLogger() -> Logger {
    var logger = Logger(label: "iap-worker.bench")
    logger.logLevel = .error
    return logger
}

/// Prints a benchmark's result: pretty JSON with sorted keys, or its table.
func printBenchResult<Result: Encodable>(_ result: Result, json: Bool, table: (Result) -> String) throws {
    if json {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        print(String(decoding: try encoder.encode(result), as: UTF8.self))
    } else {
        print(table(result))
    }
}

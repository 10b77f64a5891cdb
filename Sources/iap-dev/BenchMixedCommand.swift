import ArgumentParser
import Foundation
import Ledger
import Logging
import Sandbox
import Synchronization
import UnixSignals

/// `iap-dev bench mixed`: the workload users run, at several run lengths, optionally old and new builds alternating.
struct BenchMixedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mixed",
        abstract: "Runs the mix a live purchases topic carries through the worker, at one or more run lengths.",
        discussion: """
            Per 10,000 valid purchases 16,512 messages: duplicates, claims before the owner's message, forged \
            tokens, stolen purchases, subscriptions, purchases consumed elsewhere, paymentSeq/token mismatches and 12 \
            kinds of malformed record (docs/benchmarks.md lists the mix). Kafka is librdkafka's mock cluster (3 \
            brokers, the purchases topic in 12 partitions) over TCP, or a Tansu broker with --tansu; the Gamebase \
            simulator runs in a process of its own (this executable's gamebase-sim), the worker in another. Every \
            run starts afresh. With --baseline, the two builds alternate run by run; the summary gives medians and \
            the marginal CPU per message between consecutive lengths.
            """
    )

    @Option(help: "Valid purchases per run, comma-separated: each length is a run of its own.") var valid =
        "10000,30000"
    @OptionGroup var setup: MixedRunOptions
    @Option(help: "Runs of each length (and build); the summary gives medians.") var repeats = 1
    @Option(help: "Valid purchases run before the measured messages and not counted.") var warmup = 100
    @Option(help: "Mock brokers.") var brokers = 3
    @Option(help: "Partitions of the purchases topic.") var partitions = 12
    @Option(help: "Another iap-worker executable (the old build) to alternate with --worker, run by run.")
    var baseline: String?
    @Flag(help: "Print JSON instead of a table.") var json = false

    /// The run lengths: 1 to 1,000,000 valid purchases each (1.65 million messages, held by the mock cluster in this
    /// process), strictly ascending, so that each marginal cost is taken over more messages.
    var lengths: [Int] {
        get throws {
            let lengths = valid.split(separator: ",", omittingEmptySubsequences: false).map {
                Int($0.trimmingCharacters(in: .whitespaces))
            }
            guard !lengths.isEmpty, lengths.allSatisfy({ (1...1_000_000).contains($0 ?? 0) }),
                zip(lengths, lengths.dropFirst()).allSatisfy({ ($0 ?? 0) < ($1 ?? 0) })
            else {
                throw ValidationError(
                    "--valid takes counts from 1 to 1000000, ascending and comma-separated: 10000,30000")
            }
            return lengths.compactMap { $0 }
        }
    }

    func validate() throws {
        _ = try lengths
        guard (1...100).contains(repeats) else { throw ValidationError("--repeats takes 1 to 100") }
        // At least one: the producer's and the worker's first fetches are then out of the measured run.
        guard (1...100_000).contains(warmup) else { throw ValidationError("--warmup takes 1 to 100000") }
        guard (1...16).contains(brokers) else { throw ValidationError("--brokers takes 1 to 16") }
        guard (1...1_000).contains(partitions) else { throw ValidationError("--partitions takes 1 to 1000") }
        if let baseline, !FileManager.default.isExecutableFile(atPath: baseline) {
            throw ValidationError("\(baseline) is not an executable file")
        }
    }

    func run() async throws {
        var logger = Logger(label: "iap-worker.bench")
        logger.logLevel = .error
        var options = try setup.options(brokers: brokers)
        if let baseline { options.workers.insert(.init(label: "baseline", executable: baseline), at: 0) }
        options.lengths = try lengths
        options.repeats = repeats
        options.warmup = warmup
        options.partitions = partitions
        let json = self.json
        let settled = options
        let quiet = logger
        let report = try await interruptible {
            try await MixedBenchmark.run(settled, logger: quiet) { line in
                if !json { print(line) }
            }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
        } else {
            print("")
            print(report.table)
        }
        if report.runs.contains(where: { !$0.problems.isEmpty }) { throw ExitCode(2) }
    }
}

/// What `bench mixed` and `bench soak` share: the worker, the latency of its Gamebase, its ledger and its broker.
struct MixedRunOptions: ParsableArguments {
    @Option(help: "Simulated Gamebase latency per call, in milliseconds.") var latencyMs = 0
    @Option(help: "worker.max_in_flight of the worker.") var maxInFlight = 512
    @Option(help: "A Tansu executable: run on one Tansu broker instead of the mock cluster.") var tansu: String?
    @Option(help: "A PostgreSQL URL: each run gets a database of its own on that server (default: a SQLite file).")
    var ledgerURL: String?
    @Option(help: "The iap-worker executable to measure (default: the one beside iap-dev).") var worker: String?

    func validate() throws {
        // The worker's own ranges: worker.max_in_flight, and a latency below gamebase.timeout_ms (10 s).
        guard (1...65_536).contains(maxInFlight) else { throw ValidationError("--max-in-flight takes 1 to 65536") }
        guard (0...5_000).contains(latencyMs) else {
            throw ValidationError("--latency-ms takes 0 to 5000 (the worker's Gamebase timeout is 10 s)")
        }
        if let ledgerURL {
            do {
                _ = try PostgresLedgerURL(ledgerURL)
            } catch {
                throw ValidationError("--ledger-url takes a PostgreSQL URL (SQLite is the default): \(error)")
            }
        }
        for path in [tansu, worker].compactMap({ $0 }) where !FileManager.default.isExecutableFile(atPath: path) {
            throw ValidationError("\(path) is not an executable file")
        }
    }

    /// The bench's options for these: one worker (this build), the simulator beside this executable.
    func options(brokers: Int) throws -> MixedBenchmark.Options {
        var options = MixedBenchmark.Options(
            workers: [.init(label: "worker", executable: try Executables.worker(given: worker))],
            simulatorCommand: [Executables.this, "gamebase-sim"])
        options.latencyMs = latencyMs
        options.maxInFlight = maxInFlight
        options.broker = tansu.map { .tansu(executable: $0) } ?? .mock(brokers: brokers)
        options.postgresURL = ledgerURL
        return options
    }
}

/// Runs `work` so that Ctrl-C or SIGTERM cancels it: its children are stopped, its scratch database dropped and its
/// folder removed rather than left behind; then exits 130. The trap is set before the work starts.
func interruptible<Result: Sendable>(_ work: @escaping @Sendable () async throws -> Result) async throws -> Result {
    let trapped = await UnixSignalsSequence(trapping: .sigint, .sigterm)
    let interrupted = Interrupted()
    let task = Task { try await work() }
    let signals = Task {
        for await _ in trapped {
            interrupted.set()
            task.cancel()
            return
        }
    }
    defer { signals.cancel() }
    do {
        return try await task.value
    } catch {
        // The terminal's SIGINT reaches the children too: whatever failed after it is the interruption.
        guard interrupted.isSet || error is CancellationError else { throw error }
        FileHandle.standardError.write(Data("interrupted: the run's processes are stopped\n".utf8))
        throw ExitCode(130)
    }
}

/// Whether a stop signal came.
private final class Interrupted: Sendable {
    private let flag = Mutex(false)
    func set() { flag.withLock { $0 = true } }
    var isSet: Bool { flag.withLock { $0 } }
}

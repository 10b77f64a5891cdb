import ArgumentParser
import Foundation
import Logging
import Sandbox

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
    @Option(help: "Simulated Gamebase latency per call, in milliseconds.") var latencyMs = 0
    @Option(help: "worker.max_in_flight of the worker.") var maxInFlight = 512
    @Option(help: "Runs of each length (and build); the summary gives medians.") var repeats = 1
    @Option(help: "Valid purchases run before the measured messages and not counted.") var warmup = 100
    @Option(help: "Mock brokers.") var brokers = 3
    @Option(help: "Partitions of the purchases topic.") var partitions = 12
    @Option(help: "A Tansu executable: run on one Tansu broker instead of the mock cluster.") var tansu: String?
    @Option(help: "A PostgreSQL URL: each run gets a database of its own on that server (default: a SQLite file).")
    var ledgerURL: String?
    @Option(help: "The iap-worker executable to measure (default: the one beside iap-dev).") var worker: String?
    @Option(help: "Another iap-worker executable (the old build) to alternate with --worker, run by run.")
    var baseline: String?
    @Flag(help: "Print JSON instead of a table.") var json = false

    var lengths: [Int] {
        get throws {
            let lengths = valid.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
            guard !lengths.isEmpty, lengths.allSatisfy({ ($0 ?? 0) >= 1 && ($0 ?? 0) <= 10_000_000 }) else {
                throw ValidationError("--valid takes positive counts up to 10,000,000, comma-separated: 10000,30000")
            }
            return lengths.compactMap { $0 }
        }
    }

    func validate() throws {
        _ = try lengths
        guard (1...100).contains(repeats) else { throw ValidationError("--repeats takes 1 to 100") }
        guard (1...100_000).contains(maxInFlight) else { throw ValidationError("--max-in-flight takes 1 to 100000") }
        guard (0...1_000_000).contains(warmup) else { throw ValidationError("--warmup takes 0 to 1000000") }
        guard (0...60_000).contains(latencyMs) else { throw ValidationError("--latency-ms takes 0 to 60000") }
        guard (1...16).contains(brokers) else { throw ValidationError("--brokers takes 1 to 16") }
        guard (1...1_000).contains(partitions) else { throw ValidationError("--partitions takes 1 to 1000") }
        if let ledgerURL, !(ledgerURL.hasPrefix("postgres://") || ledgerURL.hasPrefix("postgresql://")) {
            throw ValidationError("--ledger-url takes a PostgreSQL URL (SQLite is the default: a file per run)")
        }
        for path in [tansu, baseline].compactMap({ $0 }) where !FileManager.default.isExecutableFile(atPath: path) {
            throw ValidationError("\(path) is not an executable file")
        }
    }

    func run() async throws {
        var logger = Logger(label: "iap-worker.bench")
        logger.logLevel = .error
        var workers = [MixedBenchmark.Worker(label: "worker", executable: try Executables.worker(given: worker))]
        if let baseline { workers.insert(.init(label: "baseline", executable: baseline), at: 0) }
        var options = MixedBenchmark.Options(workers: workers, simulatorCommand: [Executables.this, "gamebase-sim"])
        options.lengths = try lengths
        options.latencyMs = latencyMs
        options.maxInFlight = maxInFlight
        options.repeats = repeats
        options.warmup = warmup
        options.partitions = partitions
        options.broker = tansu.map { .tansu(executable: $0) } ?? .mock(brokers: brokers)
        options.postgresURL = ledgerURL
        let json = self.json
        let report = try await MixedBenchmark.run(options, logger: logger) { line in
            if !json { print(line) }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
        } else {
            print("")
            print(report.table)
        }
        if report.runs.contains(where: { $0.notConsumed > 0 || $0.consumedTwice > 0 }) { throw ExitCode(2) }
    }
}

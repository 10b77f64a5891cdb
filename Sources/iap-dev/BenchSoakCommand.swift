import ArgumentParser
import Foundation
import Logging
import Sandbox

/// `iap-dev bench soak`: the mixed workload at a steady pace for a long run, the worker's resident memory sampled
/// every minute — what a daemon that runs for months must show: memory that stops growing once the load is steady.
struct BenchSoakCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "Runs the mixed workload at a steady pace for minutes; says whether the worker's memory stays flat.",
        discussion: """
            The mix of `bench mixed` (docs/benchmarks.md), sent at --rate valid purchases per second (its other \
            messages in proportion: 1.65 messages per valid purchase) for --minutes, on the mock cluster (3 brokers, \
            12 partitions) or Tansu, with the Gamebase simulator in its own process. The worker's RSS is read every \
            minute from the first message; the run passes when RSS at the last minute is within --max-growth percent \
            of RSS at minute 5, and every rule of `bench mixed` holds (each valid purchase granted to its owner and \
            consumed once, every outcome as the mix says, exit 0); it exits 2 otherwise, keeping the run's folder \
            (the worker's log, the ledger). A run that cannot finish (the worker exits, the simulator does not \
            start) fails at once with exit 1, naming its kept folder.
            """
    )

    @Option(help: "Minutes of steady load (at least 6: minute 5 is the reference).") var minutes = 30
    @Option(help: "Valid purchases per second.") var rate = 300
    @Option(help: "Percent RSS may grow from minute 5 to the last minute.") var maxGrowth = 10.0
    @OptionGroup var setup: MixedRunOptions
    @Flag(help: "Print JSON instead of text.") var json = false

    /// Valid purchases the run sends: `rate` for every second of `minutes`.
    var valid: Int { minutes * 60 * rate }

    func validate() throws {
        guard (SoakVerdict.settledMinute + 1...720).contains(minutes) else {
            throw ValidationError("--minutes takes \(SoakVerdict.settledMinute + 1) to 720")
        }
        guard (1...5_000).contains(rate) else { throw ValidationError("--rate takes 1 to 5000 valid purchases/s") }
        // The mix is built whole before the run (1.65 messages per valid purchase), as `bench mixed` builds it.
        guard valid <= 1_000_000 else {
            throw ValidationError("--minutes × 60 × --rate is \(valid) valid purchases; at most 1000000")
        }
        guard maxGrowth.isFinite, (0...1_000).contains(maxGrowth) else {
            throw ValidationError("--max-growth takes 0 to 1000 (percent)")
        }
    }

    func run() async throws {
        var logger = Logger(label: "iap-worker.bench")
        logger.logLevel = .error
        var options = try setup.options(brokers: 3)
        options.lengths = [valid]
        options.pace = Double(rate)
        options.residentSampleInterval = .seconds(60)
        options.keepsFolders = true
        let json = self.json
        if !json { print("soak: \(rate) valid purchases/s for \(minutes) minutes (\(valid) valid purchases)…") }
        let settled = options
        let quiet = logger
        let report = try await interruptible {
            try await MixedBenchmark.run(settled, logger: quiet) { line in
                if !json { print(line) }
            }
        }
        let run = report.runs[0]
        let samples = run.residentSamplesMiB ?? []
        let verdict = SoakVerdict(minuteSamplesMiB: samples, allowedGrowth: maxGrowth / 100)
        if json {
            struct Output: Encodable {
                var report: MixedBenchmark.Report
                var verdict: SoakVerdict?
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(Output(report: report, verdict: verdict)), as: UTF8.self))
        } else {
            let minutes = samples.enumerated().map { "\($0.offset + 1): \(($0.element * 10).rounded() / 10)" }
            print("RSS by minute (MiB): " + minutes.joined(separator: ", "))
            print(
                String(
                    format: "worker CPU %.0f µs per message, %.0f msg/s over the run, peak RSS %.1f MiB",
                    run.workerCPUMicrosecondsPerMessage, run.messagesPerSecond, run.peakRSSMiB))
            print(verdict?.summary ?? "too few samples to compare minute \(SoakVerdict.settledMinute) with the last")
            if run.problems.isEmpty {
                print(
                    "every valid purchase granted to its owner and consumed once, none twice; every outcome as the "
                        + "mix says; the worker stopped with exit 0")
            } else {
                print("RULES BROKEN: " + run.problems.joined(separator: "; "))
            }
        }
        let passed = run.problems.isEmpty && verdict?.isFlat == true
        if let folder = run.keptFolder {
            if passed {
                try? FileManager.default.removeItem(atPath: folder)
            } else if !json {
                print("the run's logs and ledger are kept in \(folder)")
            }
        }
        if !passed { throw ExitCode(2) }
    }
}

import ArgumentParser
import Foundation
import Logging
import Sandbox

/// `iap-dev bench floor`: what one purchase cannot cost less than, each part measured alone.
struct BenchFloorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "floor",
        abstract:
            "CPU of what every purchase needs, each part alone: an HTTP exchange, a Kafka consume and produce, a sync.",
        discussion: """
            A purchase makes two HTTP/1.1 exchanges with Gamebase (Get Payment Transaction, Consume), reads one \
            message and produces one event through librdkafka, and shares one sync of the ledger with the other \
            purchases of its commit. Each is measured alone in this process, its other side in a process of its \
            own: a bare kept-alive exchange over SwiftNIO against `iap-dev gamebase-sim`; messages read with the \
            worker's Kafka configuration as `bench mixed` runs it (fetch.wait.max.ms 10) from `iap-dev dev-kafka` \
            (3 mock brokers, 12 partitions), an 800-byte event with a CloudEvent's headers produced for each and \
            its offset stored, 512 in flight, counted from the tenth message to the last delivery; a 4 KiB page \
            overwritten in place and synced (fdatasync) in --sync-dir. The parts are what the worker cannot do \
            without, each measured as a whole process does it, not a bound proven below. The floor per purchase \
            is two exchanges plus one consume and produce plus the sync's share; docs/benchmarks.md compares the \
            worker's CPU per valid purchase (`bench mixed`) with it.
            """
    )

    @Option(help: "Messages per Kafka run (HTTP exchanges: twice as many).") var purchases = 20_000
    @Option(help: "Pages synced per run.") var syncs = 2_000
    @Option(help: "Runs of each part; the summary gives medians.") var runs = 3
    @Option(help: "Where the synced file is written (default: the temporary directory; put it on the ledger's disk).")
    var syncDir: String?
    @Flag(help: "Print JSON instead of a table.") var json = false

    func validate() throws {
        guard purchases >= 1, syncs >= 1, runs >= 1 else {
            throw ValidationError("--purchases, --syncs and --runs must be positive")
        }
    }

    func run() async throws {
        let logger = benchLogger()
        var options = FloorBenchmark.Options(helperExecutable: Executables.this)
        options.purchases = purchases
        options.syncs = syncs
        options.runs = runs
        options.syncDirectory = syncDir
        let settled = options
        let result = try await interruptible { try await FloorBenchmark.run(settled, logger: logger) }
        try printBenchResult(result, json: json, table: \.table)
    }
}

import ArgumentParser
import Foundation
import Logging
import Sandbox

/// `iap-dev bench gamebase-client`: CPU per Gamebase call, the worker's client against async-http-client and a
/// bare NIO exchange.
struct BenchClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gamebase-client",
        abstract:
            "CPU per Get Payment Transaction call: the worker's Gamebase client, async-http-client and a bare NIO exchange.",
        discussion: """
            The simulator runs as a separate `iap-dev gamebase-sim` process; this process makes the calls, so \
            its CPU time is the client's. async-http-client is configured as the worker would configure it (no \
            redirects, no tracer) and its answers read by the worker's reader. The bare exchange (kept-alive connections, no pool, no timeouts, no \
            decoding) is the floor a client on SwiftNIO starts from. Clients alternate for --runs rounds.
            """
    )

    @Option(help: "Calls per run.") var requests = 40_000
    @Option(help: "Calls in flight (and connections).") var concurrency = 32
    @Option(help: "Rounds; each runs every client.") var runs = 3
    @Flag(help: "Print JSON instead of a table.") var json = false

    func validate() throws {
        guard requests >= 1, concurrency >= 1, runs >= 1 else {
            throw ValidationError("--requests, --concurrency and --runs must be positive")
        }
    }

    func run() async throws {
        let logger = benchLogger()
        var options = ClientBenchmark.Options(
            simulatorExecutable: Executables.this)
        options.requests = requests
        options.concurrency = concurrency
        options.runs = runs
        let result = try await ClientBenchmark.run(options, logger: logger)
        try printBenchResult(result, json: json, table: \.table)
    }
}

import App
import ArgumentParser
import Foundation
import GamebaseSimulator
import Logging
import ServiceLifecycle
import UnixSignals

struct GamebaseSimCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gamebase-sim",
        abstract: "The Gamebase server API simulator as an HTTP server (seeding, latency, fault injection).",
        discussion: """
            FILE is a JSON array of payments: each object holds the Get Payment Transaction result fields \
            (paymentSeq, userId and accessToken required) plus "consumed": true|false. More payments can be added \
            while it runs with POST /admin/payments; GET /admin/counters shows calls per API, consumes per \
            paymentSeq and List Consumables calls per userId; POST /admin/faults changes fault injection.
            """
    )

    @Option(help: "Port to listen on (0 picks a free one; the first line printed is the base URL).")
    var port: Int = 8080
    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"
    @Option(name: .customLong("app-id"), help: "The app id callers must use in the path.")
    var appID: String
    @Option(name: .customLong("secret-key"), help: "The X-Secret-Key callers must send.")
    var secretKey: String
    @Option(name: .customLong("payments"), help: "JSON array of payments to start with.")
    var paymentsFile: String?
    @Option(name: .customLong("latency-ms"), help: "Latency added to every API answer.")
    var latencyMs: Int = 0
    @Option(name: .customLong("fault-rate"), help: "Share (0-1) of API calls answered with a transient failure.")
    var faultRate: Double = 0
    @Option(name: .customLong("slow-consume-rate"), help: "Share (0-1) of consumes that apply but answer late.")
    var slowConsumeRate: Double = 0
    @Option(name: .customLong("slow-consume-delay-ms"), help: "How late a slow consume answers.")
    var slowConsumeDelayMs: Int = 12_000
    @Option(
        name: .customLong("unknown-field-rate"), help: "Share (0-1) of answers with fields the contract does not list.")
    var unknownFieldRate: Double = 0.1
    @Option(name: .customLong("unknown-token-code"), help: "resultCode for an unknown access token.")
    var unknownTokenCode: Int = 1100
    @Option(
        name: .customLong("token-result-code"),
        help:
            "TOKEN=CODE: Get Payment Transaction answers CODE for TOKEN on every call (a poison purchase); repeatable.")
    var tokenResultCodes: [String] = []
    @Flag(
        name: .customLong("list-non-consumables"),
        help: "List Consumables lists unconsumed subscriptions (AUTO_RENEWABLE) too; unconfirmed for the real server.")
    var listNonConsumables = false

    /// `--token-result-code` values, parsed.
    var parsedTokenResultCodes: [String: Int] {
        get throws {
            var codes: [String: Int] = [:]
            for entry in tokenResultCodes {
                guard let separator = entry.lastIndex(of: "="), let code = Int(entry[entry.index(after: separator)...]),
                    separator != entry.startIndex
                else { throw ValidationError("--token-result-code takes TOKEN=CODE, e.g. tok-1=9999") }
                codes[String(entry[..<separator])] = code
            }
            return codes
        }
    }

    func validate() throws {
        for (name, rate) in [
            ("--fault-rate", faultRate), ("--slow-consume-rate", slowConsumeRate),
            ("--unknown-field-rate", unknownFieldRate),
        ]
        where !(0...1).contains(rate) {
            throw ValidationError("\(name) must be between 0 and 1")
        }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535") }
        guard latencyMs >= 0, slowConsumeDelayMs >= 0 else { throw ValidationError("latencies must not be negative") }
        _ = try parsedTokenResultCodes
    }

    func run() async throws {
        var logger = Logger(label: "iap-worker.gamebase-sim")
        logger.logLevel = .warning
        var payments: [SimulatedPayment] = []
        if let paymentsFile {
            do {
                payments = try JSONDecoder().decode(
                    [SimulatedPayment].self, from: Data(contentsOf: URL(fileURLWithPath: paymentsFile)))
            } catch {
                throw ValidationError("cannot read payments from \(paymentsFile): \(error)")
            }
        }
        let state = SimulatorState(
            payments: payments,
            faults: SimulatorFaults(
                latencyMs: latencyMs, faultRate: faultRate, slowConsumeRate: slowConsumeRate,
                slowConsumeDelayMs: slowConsumeDelayMs, unknownFieldRate: unknownFieldRate,
                unknownTokenResultCode: unknownTokenCode, tokenResultCodes: try parsedTokenResultCodes,
                listNonConsumables: listNonConsumables))
        let simulator = GamebaseSimulator(
            configuration: .init(host: host, port: port, appID: appID, secretKey: secretKey), state: state,
            logger: logger)
        let count = payments.count
        try await SimulatorAnnouncer.serve(simulator, logger: logger) {
            [await simulator.baseURL(), "payments \(count)"]
        }
    }
}

import Foundation

/// What `iap-dev bench` measured.
public struct BenchmarkResult: Codable, Sendable {
    public struct Latency: Codable, Sendable {
        public var p50: Double
        public var p90: Double
        public var p99: Double
        public var max: Double
    }

    public var purchases: Int
    /// Purchases run before the measured ones, not counted.
    public var warmupPurchases: Int
    public var gamebaseLatencyMs: Int
    public var maxInFlight: Int
    public var offeredRate: Double?
    public var ledger: String
    /// Which Kafka: `mock` (librdkafka's mock cluster, in the bench process) or `external <bootstrap servers>`.
    public var kafka = "mock"
    /// The librdkafka the bench process loaded (the worker, started from it, loads the same unless told otherwise).
    public var librdkafka = ""
    /// From the first message sent to the last purchase consumed.
    public var seconds: Double
    public var throughput: Double
    /// From each message's timestamp to its Consume at Gamebase, in milliseconds.
    public var endToEndMs: Latency
    public var workerCPUMicrosecondsPerPurchase: Double
    /// Purchases the worker fulfils per second of its own CPU time: what a core buys.
    public var purchasesPerWorkerCPUSecond: Double = 0
    /// CPU of the bench process itself (mock broker, simulator, producer) per purchase, over the same run.
    public var harnessCPUMicrosecondsPerPurchase: Double
    public var cores: Int
    /// The throughput at which worker and harness together would use every core: what this machine allows
    /// for the measured CPU costs, whatever the concurrency.
    public var cpuCeiling: Double
    public var peakRSSMiB: Double
    public var rssGrowthPercent: Double?
    public var recoverySeconds: Double?
    /// paymentSeqs Gamebase saw consumed more than once (must be 0).
    public var consumedTwice: Int
    public var workerExitStatus: Int?
    /// Messages produced in a mixed run (purchases, duplicates, rejected claims, malformed records).
    public var messages: Int?
    /// Worker CPU divided by every message of a mixed run.
    public var workerCPUMicrosecondsPerMessage: Double?
    /// Calls into the C allocator during the measured run (`--count-allocations`), by function.
    public var allocationsByFunction: [String: Int]?
    public var allocationsPerPurchase: Double?
    public var allocationsPerMessage: Double?
    public var layout =
        "worker: a separate `iap-worker run` process; mock Kafka cluster, Gamebase simulator and producer: the bench process"

    public var table: String {
        var rows: [(String, String)] = [
            ("purchases", "\(purchases) (after \(warmupPurchases) not counted)"),
            ("Gamebase latency", "\(gamebaseLatencyMs) ms"),
            ("max_in_flight", "\(maxInFlight)"),
            ("offered rate", offeredRate.map { String(format: "%.0f /s", $0) } ?? "all at once"),
            ("ledger", ledger),
            ("kafka", "\(kafka), librdkafka \(librdkafka)"),
            ("throughput", String(format: "%.0f purchases/s (%.2f s)", throughput, seconds)),
            ("end-to-end p50 / p90", String(format: "%.1f / %.1f ms", endToEndMs.p50, endToEndMs.p90)),
            ("end-to-end p99 / max", String(format: "%.1f / %.1f ms", endToEndMs.p99, endToEndMs.max)),
            ("worker CPU per purchase", String(format: "%.1f µs", workerCPUMicrosecondsPerPurchase)),
            ("per worker CPU-second", String(format: "%.0f purchases", purchasesPerWorkerCPUSecond)),
            (
                "harness CPU per purchase",
                String(
                    format: kafka == "mock"
                        ? "%.1f µs (mock broker, simulator, producer)" : "%.1f µs (simulator, producer)",
                    harnessCPUMicrosecondsPerPurchase)
            ),
            ("CPU ceiling", String(format: "%.0f purchases/s (%d cores / both CPU costs)", cpuCeiling, cores)),
            ("worker peak RSS", String(format: "%.1f MiB", peakRSSMiB)),
        ]
        if let rssGrowthPercent {
            rows.append(("worker RSS growth", String(format: "%.1f %% (10%% mark to end)", rssGrowthPercent)))
        }
        if let messages, let perMessage = workerCPUMicrosecondsPerMessage {
            rows.append(("messages (mixed)", "\(messages)"))
            rows.append(("worker CPU per message", String(format: "%.1f µs", perMessage)))
        }
        if let perPurchase = allocationsPerPurchase {
            rows.append(
                (
                    "allocations per purchase",
                    String(format: "%.0f (CPU and latency above are not comparable: counted run)", perPurchase)
                ))
            if messages != nil, let perMessage = allocationsPerMessage {
                rows.append(("allocations per message", String(format: "%.0f", perMessage)))
            }
        }
        if let recoverySeconds {
            rows.append(("kill -9 → resumed", String(format: "%.1f s after restart", recoverySeconds)))
        }
        rows.append(("consumed twice", "\(consumedTwice)"))
        rows.append(("worker exit status", workerExitStatus.map(String.init) ?? "killed"))
        let width = rows.map(\.0.count).max() ?? 0
        return (rows.map { $0.0.padding(toLength: width + 2, withPad: " ", startingAt: 0) + $0.1 } + ["", layout])
            .joined(separator: "\n")
    }
}

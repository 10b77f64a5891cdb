import AsyncHTTPClient
import Foundation
import Gamebase
import GamebaseSimulator
import Histogram
import Kafka
import KafkaTesting
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import Wire

/// `iap-dev bench`: the whole pipeline under load — producer, librdkafka's mock broker, the worker as a
/// separate `iap-worker run` process, the Gamebase simulator with a set latency, and a ledger.
public enum PipelineBenchmark {
    public struct Options: Sendable {
        public var purchases = 20_000
        public var latencyMs = 50
        public var maxInFlight = 512
        /// Purchases per second offered; nil produces them all at once.
        public var rate: Double?
        /// Ledger URL for the worker; nil means a SQLite file in the sandbox folder.
        public var ledgerURL: String?
        /// Kill -9 the worker when half the purchases are consumed, restart it, and time the recovery.
        public var killRestart = false
        /// librdkafka `session.timeout.ms` of the worker; nil keeps the worker's default.
        public var sessionTimeoutMs: Int?
        /// Purchases run through the worker before the measured ones, not counted: they open its connections
        /// and start its fetching, which a long-running worker has long done.
        public var warmup = 100
        /// Put before every paymentSeq and userId, so runs against one ledger never meet each other's purchases.
        public var idPrefix = ""
        /// The `iap-worker` executable to run as the worker.
        public var workerExecutable: String
        /// Serve the worker's operator console and ask for its overview every second through the run (what an
        /// operator with the page open costs the purchase path).
        public var consoleRefresh = false
        /// Mix duplicates, rejected claims and malformed records among the purchases (16 messages per 10
        /// purchases), and report CPU per message too.
        public var mixed = false
        /// An external Kafka cluster's bootstrap servers (a real broker over TCP) instead of librdkafka's mock cluster
        /// in this process; the run's topics get a prefix of their own and are left on the cluster.
        public var bootstrapServers: String?
        /// Count the worker's calls into the C allocator during the measured run (`perf stat` on uprobes; the run's
        /// CPU and latency figures are then not comparable).
        public var countAllocations = false

        public init(workerExecutable: String) {
            self.workerExecutable = workerExecutable
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public static func run(
        _ options: Options, logger: Logger, say: @escaping @Sendable (String) -> Void
    ) async throws -> BenchmarkResult {
        let p = options.idPrefix
        let payments =
            (0..<options.purchases).map { DemoBatch.payment("\(p)b\($0)", user: "\(p)u\($0)") }
            + (0..<options.warmup).map { DemoBatch.payment("\(p)w\($0)", user: "\(p)w\($0)") }
        let faults = SimulatorFaults(latencyMs: options.latencyMs, unknownFieldRate: 0)
        let consolePort = options.consoleRefresh ? try freeLoopbackPort() : nil
        return try await Sandbox.with(
            brokers: 1, bootstrapServers: options.bootstrapServers, payments: payments, faults: faults, logger: logger
        ) { sandbox in
            let ledgerURL = options.ledgerURL ?? sandbox.ledgerURL
            var environment = [
                "IAP_WORKER_CONFIG": "", "KAFKA_BOOTSTRAP_SERVERS": sandbox.cluster.bootstrapServers,
                "KAFKA_GROUP_ID": "bench-\(UUID().uuidString.prefix(8))", "GAMEBASE_BASE_URL": sandbox.simulatorURL,
                "GAMEBASE_APP_ID": Sandbox.appID, "GAMEBASE_SECRET_KEY": Sandbox.secretKey, "LEDGER_URL": ledgerURL,
                "SERVER_PORT": "0", "CONSOLE_PORT": String(consolePort ?? 0),
                "WORKER_MAX_IN_FLIGHT": String(options.maxInFlight),
                "GAMEBASE_MAX_CONNECTIONS": String(min(max(options.maxInFlight, 8), 1024)),
            ]
            environment.merge(sandbox.topicEnvironment) { $1 }
            // librdkafka's mock broker answers a fetch with nothing new only when its wait ends (a real broker
            // answers as soon as data arrives); a short wait keeps that out of the latency measured.
            environment["KAFKA_LIBRDKAFKA_FETCH_WAIT_MAX_MS"] =
                ProcessInfo.processInfo.environment["KAFKA_LIBRDKAFKA_FETCH_WAIT_MAX_MS"] ?? "10"
            if let timeout = options.sessionTimeoutMs {
                environment["KAFKA_LIBRDKAFKA_SESSION_TIMEOUT_MS"] = String(timeout)
            }
            var worker = try MeasuredProcess(
                executable: options.workerExecutable, arguments: ["run"], environment: environment,
                logPath: sandbox.folder.appendingPathComponent("worker-1.log").path)
            try await waitUntilReady(worker, within: .seconds(60))
            let load = try LoadGenerator(sandbox: sandbox, logger: logger)
            if options.warmup > 0 {
                say("worker ready (pid \(worker.pid)); warming up with \(options.warmup) purchases…")
                _ = try await load.produce(count: options.warmup, rate: nil) { i in
                    (key: "\(p)w\(i)", value: DemoBatch.message("\(p)w\(i)", user: "\(p)w\(i)"), seq: "\(p)w\(i)")
                }
                let warmDeadline = ContinuousClock.now + .seconds(60)
                while sandbox.simulator.state.consumedCount < options.warmup {
                    guard ContinuousClock.now < warmDeadline else {
                        throw Failure(description: "the warm-up purchases were not consumed in time")
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            let warmup = options.warmup
            let measuredConsumed: @Sendable () -> Int = { sandbox.simulator.state.consumedCount - warmup }
            say("producing \(options.purchases) purchases…")

            // Resident memory of whichever worker runs, sampled through the whole run (production included).
            let sampled = Mutex<(worker: MeasuredProcess, samples: [Int])>((worker, []))
            let sampler = Task {
                while !Task.isCancelled {
                    sampled.withLock { state in
                        if let memory = state.worker.memory { state.samples.append(memory.resident) }
                    }
                    try? await Task.sleep(for: .milliseconds(200))
                }
            }
            defer { sampler.cancel() }
            let console = consolePort.map { ConsoleRefresher(url: "http://127.0.0.1:\($0)/") }
            defer { console?.cancel() }
            let cpuBefore = worker.cpuTime ?? .zero
            let harnessBefore = MeasuredProcess.harnessCPUTime
            let counter =
                options.countAllocations ? try AllocationCounter(pid: worker.pid, folder: sandbox.folder) : nil
            let messages = workload(options)
            let sent = try await load.produce(count: messages.count, rate: options.rate) { messages[$0] }
            var recovery: Duration?
            var killed = false
            var cpuAtKill: Duration = .zero
            let deadline = ContinuousClock.now + .seconds(120 + options.purchases / 20)
            while measuredConsumed() < options.purchases {
                guard ContinuousClock.now < deadline else {
                    throw Failure(description: "only \(measuredConsumed()) of \(options.purchases) consumed in time")
                }
                if options.killRestart, !killed, measuredConsumed() * 2 >= options.purchases {
                    killed = true
                    cpuAtKill = worker.cpuTime ?? .zero
                    worker.kill9()
                    // Consumes the killed worker had already sent still land for one simulated latency; only
                    // after them does a new consume prove that the restarted worker resumed.
                    try await Task.sleep(for: .milliseconds(2 * options.latencyMs + 200))
                    let before = sandbox.simulator.state.consumedCount
                    let restarted = ContinuousClock.now
                    worker = try MeasuredProcess(
                        executable: options.workerExecutable, arguments: ["run"], environment: environment,
                        logPath: sandbox.folder.appendingPathComponent("worker-2.log").path)
                    sampled.withLock { $0.worker = worker }
                    say("killed the worker at \(before) consumed; restarted it (pid \(worker.pid))")
                    while sandbox.simulator.state.consumedCount == before {
                        guard ContinuousClock.now < deadline else {
                            throw Failure(description: "the restarted worker never resumed")
                        }
                        try await Task.sleep(for: .milliseconds(10))
                    }
                    recovery = ContinuousClock.now - restarted
                }
                try await Task.sleep(for: .milliseconds(killed || !options.killRestart ? 100 : 10))
            }
            if messages.count > options.purchases, let port = worker.httpPort {
                // The purchases are consumed; the rejections, duplicates and malformed records among them are
                // done once the worker has counted an outcome for every message.
                while await outcomesCounted(port: port) < messages.count + warmup {
                    guard ContinuousClock.now < deadline else {
                        throw Failure(description: "not every message had an outcome in time")
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            let allocations = try await counter?.stop()
            let cpu =
                (worker.cpuTime ?? .zero) - (killed ? .zero : cpuBefore) + (killed ? cpuAtKill - cpuBefore : .zero)
            if let console {
                let (pages, failures) = await console.stop()
                say("console: the overview served \(pages) times while measuring, \(failures) failed")
                if pages == 0 || failures > 0 {
                    throw Failure(
                        description:
                            "the console's overview was not served every time (\(pages) served, \(failures) failed)")
                }
            }
            let harnessCPU = MeasuredProcess.harnessCPUTime - harnessBefore
            let memory = worker.memory
            sampler.cancel()
            let rssSamples = sampled.withLock { $0.samples }
            let status = await worker.terminate()
            await load.close()

            let consumedAt = sandbox.simulator.state.firstConsumedAt
            var histogram = Histogram<UInt64>(
                highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
            var first = Date.distantFuture
            var last = Date.distantPast
            for (seq, start) in sent {
                guard let end = consumedAt[seq] else { continue }
                first = min(first, start)
                last = max(last, end)
                _ = histogram.record(UInt64(max(0, end.timeIntervalSince(start)) * 1_000_000))
            }
            let seconds = last.timeIntervalSince(first)
            let duplicates = sandbox.simulator.state.consumes.values.filter { $0 > 1 }.count
            let workerMicroseconds = microseconds(cpu) / Double(options.purchases)
            var result = BenchmarkResult(
                purchases: options.purchases, warmupPurchases: options.warmup, gamebaseLatencyMs: options.latencyMs,
                maxInFlight: options.maxInFlight, offeredRate: options.rate,
                ledger: ledgerURL.hasPrefix("postgres") ? "postgresql" : "sqlite", seconds: seconds,
                throughput: Double(options.purchases) / seconds,
                endToEndMs: .init(
                    p50: Double(histogram.valueAtPercentile(50)) / 1000,
                    p90: Double(histogram.valueAtPercentile(90)) / 1000,
                    p99: Double(histogram.valueAtPercentile(99)) / 1000, max: Double(histogram.max) / 1000),
                workerCPUMicrosecondsPerPurchase: microseconds(cpu) / Double(options.purchases),
                harnessCPUMicrosecondsPerPurchase: microseconds(harnessCPU) / Double(options.purchases),
                cores: ProcessInfo.processInfo.activeProcessorCount,
                cpuCeiling: Double(ProcessInfo.processInfo.activeProcessorCount) * 1e6
                    / max((microseconds(cpu) + microseconds(harnessCPU)) / Double(options.purchases), 1),
                peakRSSMiB: Double(memory?.peak ?? rssSamples.max() ?? 0) / 1_048_576,
                rssGrowthPercent: growth(rssSamples),
                recoverySeconds: recovery.map {
                    $0.seconds
                },
                consumedTwice: duplicates, workerExitStatus: status.map(Int.init))
            result.purchasesPerWorkerCPUSecond = workerMicroseconds > 0 ? 1_000_000 / workerMicroseconds : 0
            result.kafka = options.bootstrapServers.map { "external \($0)" } ?? "mock"
            result.librdkafka = Librdkafka.versionString
            if options.bootstrapServers != nil {
                result.layout =
                    "worker: a separate `iap-worker run` process; Gamebase simulator and producer: the bench process; "
                    + "Kafka: an external broker (its CPU is in neither figure)"
            }
            if options.mixed {
                result.messages = messages.count
                result.workerCPUMicrosecondsPerMessage = microseconds(cpu) / Double(messages.count)
            }
            if let allocations {
                let total = allocations.values.reduce(0, +)
                result.allocationsByFunction = allocations
                result.allocationsPerPurchase = Double(total) / Double(options.purchases)
                result.allocationsPerMessage = Double(total) / Double(messages.count)
            }
            return result
        }
    }

    /// The measured messages: one per purchase, or with `mixed`, per ten purchases also three duplicates, a claim
    /// of another user's purchase (sent before its owner's, so Gamebase is asked and it is rejected), a claim with
    /// a token Gamebase does not know (rejected), and a record that is no JSON (dead-lettered).
    /// Only the purchases' own messages are timed (`seq`); the others carry labels nothing is consumed under.
    static func workload(_ options: Options) -> [(key: String, value: String, seq: String)] {
        let p = options.idPrefix
        var messages: [(key: String, value: String, seq: String)] = []
        messages.reserveCapacity(options.mixed ? options.purchases * 16 / 10 + 1 : options.purchases)
        for i in 0..<options.purchases {
            let seq = "\(p)b\(i)"
            let user = "\(p)u\(i)"
            guard options.mixed else {
                messages.append((user, DemoBatch.message(seq, user: user), seq))
                continue
            }
            switch i % 10 {
            case 1: messages.append((user, DemoBatch.message(seq, user: "\(p)thief\(i)"), "claim-\(i)"))
            case 2:
                messages.append((user, DemoBatch.message("\(p)x\(i)", user: user, token: "forged-\(i)"), "forged-\(i)"))
            case 4: messages.append((user, "not JSON \(i)", "malformed-\(i)"))
            default: break
            }
            messages.append((user, DemoBatch.message(seq, user: user), seq))
            if [0, 3, 6].contains(i % 10) {
                messages.append((user, DemoBatch.message(seq, user: user), "duplicate-\(i)"))
            }
        }
        return messages
    }

    /// The worker's `iap_purchases_total` over every outcome (0 while its metrics do not answer).
    static func outcomesCounted(port: Int) async -> Int {
        await MixedBenchmark.outcomeCounts(port: port).values.reduce(0, +)
    }

    static func microseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
    }

    /// RSS growth from the end of the first tenth of the run to its end, in percent.
    static func growth(_ samples: [Int]) -> Double? {
        guard samples.count >= 20, let last = samples.last else { return nil }
        let early = samples[samples.count / 10]
        return Double(last - early) * 100 / Double(max(early, 1))
    }

    static func waitUntilReady(_ worker: MeasuredProcess, within limit: Duration) async throws {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            guard worker.isRunning else {
                throw Failure(description: "the worker exited during start:\n\(worker.logTail())")
            }
            if let port = worker.httpPort,
                let response = try? await HTTPClient.shared.execute(
                    HTTPClientRequest(url: "http://127.0.0.1:\(port)/readyz"), timeout: .seconds(2)),
                response.status == .ok
            {
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw Failure(description: "the worker was not ready within \(limit)")
    }
}

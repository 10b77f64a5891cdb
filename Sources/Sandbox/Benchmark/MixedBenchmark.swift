import App
import AsyncHTTPClient
import Foundation
import Fulfilment
import GamebaseSimulator
import Histogram
import Kafka
import KafkaTesting
import Ledger
import Logging
import NIOCore
import Synchronization
import Wire

/// `iap-dev bench mixed`: the workload users run (``MixedWorkload``) through the worker as deployed — librdkafka's
/// mock cluster of 3 brokers with a purchases topic of 12 partitions over TCP (or a Tansu broker), the Gamebase
/// simulator in a process of its own, the worker in another — at one or more run lengths, so that the marginal cost
/// between two lengths leaves start-up out. Each run starts everything afresh: a new cluster, simulator and ledger
/// (on PostgreSQL a database of its own, dropped afterwards).
public enum MixedBenchmark {
    public enum Broker: Sendable {
        /// librdkafka's mock cluster in the bench process, with this many brokers.
        case mock(brokers: Int)
        /// A Tansu broker process started from this executable (one broker, in-memory storage).
        case tansu(executable: String)
    }

    public struct Worker: Sendable {
        public var label: String
        public var executable: String

        public init(label: String, executable: String) {
            self.label = label
            self.executable = executable
        }
    }

    public struct Options: Sendable {
        /// Valid purchases per run; each length is a run of its own, in this order.
        public var lengths = [10_000, 30_000]
        public var latencyMs = 0
        public var maxInFlight = 512
        /// Each length this many times; the summary gives medians.
        public var repeats = 1
        /// Valid purchases run before the measured messages and not counted.
        public var warmup = 100
        public var broker = Broker.mock(brokers: 3)
        /// Partitions of the purchases topic.
        public var partitions = 12
        /// A PostgreSQL URL whose server gets a database per run; nil runs on a SQLite file per run.
        public var postgresURL: String?
        /// The builds to run, alternating run by run (old and new: one host, one session).
        public var workers: [Worker]
        /// How to start the Gamebase simulator: an executable and its leading arguments (`iap-dev gamebase-sim`).
        public var simulatorCommand: [String]
        /// Valid purchases per second the mix is sent at (its other messages in proportion); nil sends it as fast as
        /// the producer takes it.
        public var pace: Double?
        /// How often the worker's resident memory is sampled during the measured messages; nil: never (the peak is
        /// read at the end either way).
        public var residentSampleInterval: Duration?
        /// Keep every run's folder (logs, a SQLite ledger), not only a failed run's: the caller judges the run
        /// further (a soak's memory) and removes it (``Run/keptFolder``).
        public var keepsFolders = false

        public init(workers: [Worker], simulatorCommand: [String]) {
            self.workers = workers
            self.simulatorCommand = simulatorCommand
        }
    }

    /// One run of one build at one length.
    public struct Run: Codable, Sendable {
        public var worker: String
        public var valid: Int
        public var messages: Int
        /// From the first measured message sent to the last outcome counted.
        public var seconds: Double
        public var workerCPUSeconds: Double
        public var workerCPUMicrosecondsPerMessage: Double
        public var workerCPUMicrosecondsPerValid: Double
        public var simulatorCPUMicrosecondsPerMessage: Double
        public var messagesPerSecond: Double
        /// A valid purchase's message sent to its Consume at Gamebase, in milliseconds.
        public var p50Ms: Double
        public var p99Ms: Double
        public var peakRSSMiB: Double
        /// `iap_purchases_total` by outcome over the measured messages.
        public var outcomes: [String: Int]
        /// Valid purchases Gamebase did not see consumed (must be 0).
        public var notConsumed: Int
        /// paymentSeqs Gamebase saw consumed more than once (must be 0).
        public var consumedTwice: Int
        /// Valid purchases the ledger granted to another player than their owner, or not at all (must be 0).
        public var grantedAmiss: Int
        /// The outcome counts the workload must end in (``outcomes`` must equal them).
        public var expectedOutcomes: [String: Int]
        public var workerExitStatus: Int?
        /// Where a run that broke a rule left its logs.
        public var keptFolder: String?
        /// The worker's resident memory (`VmRSS`, MiB) every ``Options/residentSampleInterval`` from the first
        /// measured message; nil when not sampled.
        public var residentSamplesMiB: [Double]?

        /// What this run did wrong, in words; empty when it kept every rule.
        public var problems: [String] {
            var problems: [String] = []
            if notConsumed > 0 { problems.append("\(notConsumed) valid purchases not consumed") }
            if consumedTwice > 0 { problems.append("\(consumedTwice) consumed twice") }
            if grantedAmiss > 0 { problems.append("\(grantedAmiss) granted to another player or not at all") }
            if outcomes.filter({ $0.value != 0 }) != expectedOutcomes.filter({ $0.value != 0 }) {
                problems.append(
                    "outcomes \(outcomes.sorted { $0.key < $1.key }), expected \(expectedOutcomes.sorted { $0.key < $1.key })"
                )
            }
            if workerExitStatus != 0 {
                problems.append("the worker's exit status \(workerExitStatus.map(String.init) ?? "none: killed")")
            }
            return problems
        }
    }

    public struct Report: Codable, Sendable {
        public var ledger: String
        public var kafka: String
        public var librdkafka: String
        public var gamebaseLatencyMs: Int
        public var maxInFlight: Int
        public var mix: [Int: [MixedWorkload.Kind]]
        public var runs: [Run]

        /// The medians of each build at each length.
        public func median(worker: String, valid: Int, _ value: (Run) -> Double) -> Double? {
            let values = runs.filter { $0.worker == worker && $0.valid == valid }.map(value).sorted()
            guard !values.isEmpty else { return nil }
            return values.count % 2 == 1
                ? values[values.count / 2] : (values[values.count / 2 - 1] + values[values.count / 2]) / 2
        }

        /// Worker CPU per message between two lengths: the extra CPU of the longer run over its extra messages,
        /// from the medians of total CPU.
        public func marginal(worker: String, from shorter: Int, to longer: Int) -> Double? {
            guard let cpu1 = median(worker: worker, valid: shorter, \.workerCPUSeconds),
                let cpu2 = median(worker: worker, valid: longer, \.workerCPUSeconds),
                let messages1 = runs.first(where: { $0.valid == shorter })?.messages,
                let messages2 = runs.first(where: { $0.valid == longer })?.messages, messages2 > messages1
            else { return nil }
            return (cpu2 - cpu1) * 1e6 / Double(messages2 - messages1)
        }

        public var table: String {
            let workers = runs.map(\.worker).reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
            let lengths = runs.map(\.valid).reduce(into: [Int]()) { if !$0.contains($1) { $0.append($1) } }
            let repeats = runs.filter { $0.worker == workers.first && $0.valid == lengths.first }.count
            var lines = [
                "ledger \(ledger); Kafka \(kafka), librdkafka \(librdkafka); Gamebase latency \(gamebaseLatencyMs) ms; "
                    + "max_in_flight \(maxInFlight); medians of \(repeats)",
                "",
                "| worker | valid | messages | CPU per message | CPU per valid | msg/s | p50 | p99 | peak RSS |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            for length in lengths {
                for worker in workers {
                    func m(_ value: (Run) -> Double) -> Double { median(worker: worker, valid: length, value) ?? .nan }
                    let messages = runs.first { $0.valid == length }?.messages ?? 0
                    lines.append(
                        "| \(worker) | \(length) | \(messages) | "
                            + String(
                                format: "%.0f µs | %.0f µs | %.0f | %.1f ms | %.1f ms | %.1f MiB |",
                                m(\.workerCPUMicrosecondsPerMessage), m(\.workerCPUMicrosecondsPerValid),
                                m(\.messagesPerSecond), m(\.p50Ms), m(\.p99Ms), m(\.peakRSSMiB)))
                }
            }
            for (shorter, longer) in zip(lengths, lengths.dropFirst()) {
                for worker in workers {
                    if let marginal = marginal(worker: worker, from: shorter, to: longer) {
                        lines.append(
                            String(
                                format: "marginal CPU per message, %@: %d → %d valid: %.0f µs", worker, shorter, longer,
                                marginal))
                    }
                }
            }
            let failed = runs.filter { !$0.problems.isEmpty }
            lines.append(
                failed.isEmpty
                    ? "every run: each valid purchase granted to its owner and consumed once, none twice; "
                        + "every outcome as the mix says; the worker stopped with exit 0"
                    : "RUNS THAT BROKE A RULE: "
                        + failed.map {
                            "\($0.worker) \($0.valid): \($0.problems.joined(separator: "; "))"
                                + ($0.keptFolder.map { " (logs in \($0))" } ?? "")
                        }
                        .joined(separator: " | "))
            return lines.joined(separator: "\n")
        }
    }

    /// The pipeline bench's failure: one type for every bench run that could not finish.
    public typealias Failure = PipelineBenchmark.Failure

    public static func run(_ options: Options, logger: Logger, say: @escaping @Sendable (String) -> Void) async throws
        -> Report
    {
        let kafka: String =
            switch options.broker {
            case .mock(let brokers): "mock cluster, \(brokers) brokers, \(options.partitions) partitions"
            case .tansu: "Tansu, 1 broker, \(options.partitions) partitions"
            }
        var report = Report(
            ledger: options.postgresURL == nil ? "sqlite" : "postgresql", kafka: kafka,
            librdkafka: Librdkafka.versionString, gamebaseLatencyMs: options.latencyMs,
            maxInFlight: options.maxInFlight, mix: [:], runs: [])
        // Each length's mix is built once, for the report and for every run of it.
        var workloads: [Int: MixedWorkload] = [:]
        for length in options.lengths {
            let workload = MixedWorkload(valid: length)
            workloads[length] = workload
            report.mix[length] = workload.kinds
        }
        for repeat_ in 0..<options.repeats {
            for (index, length) in options.lengths.enumerated() {
                // The builds take turns going first, so a host that drifts favours neither.
                for worker in (repeat_ + index) % 2 == 0 ? options.workers : options.workers.reversed() {
                    say("run \(repeat_ + 1)/\(options.repeats): \(worker.label), \(length) valid purchases…")
                    let run = try await runOnce(
                        workloads[length] ?? MixedWorkload(valid: length), worker: worker, options: options,
                        logger: logger)
                    say(
                        String(
                            format: "  %d messages in %.1f s: %.0f msg/s, worker %.0f µs per message (%.0f per valid), "
                                + "p50 %.1f ms, p99 %.1f ms, peak RSS %.1f MiB",
                            run.messages, run.seconds, run.messagesPerSecond, run.workerCPUMicrosecondsPerMessage,
                            run.workerCPUMicrosecondsPerValid, run.p50Ms, run.p99Ms, run.peakRSSMiB))
                    say(
                        "  outcomes: "
                            + run.outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(
                                separator: ", "))
                    report.runs.append(run)
                }
            }
        }
        return report
    }

    /// One run: a fresh cluster, simulator process, ledger and worker process; the warm-up, then the measured mix.
    /// A run that fails keeps its folder (the worker's and the simulator's logs, the ledger) and names it.
    static func runOnce(_ workload: MixedWorkload, worker: Worker, options: Options, logger: Logger) async throws
        -> Run
    {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "iap-bench-mixed-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        do {
            var run = try await runOnce(workload, worker: worker, options: options, in: folder, logger: logger)
            if run.problems.isEmpty && !options.keepsFolders {
                try? FileManager.default.removeItem(at: folder)
            } else {
                run.keptFolder = folder.path  // the logs (and a SQLite ledger) of a run that broke a rule
            }
            return run
        } catch {
            // Cancelled (Ctrl-C): whatever the interrupted call threw, nothing to keep.
            guard !Task.isCancelled, !(error is CancellationError) else {
                try? FileManager.default.removeItem(at: folder)
                throw CancellationError()
            }
            throw Failure(description: "\(error)\n(the run's logs are kept in \(folder.path))")
        }
    }

    static func runOnce(
        _ workload: MixedWorkload, worker: Worker, options: Options, in folder: URL, logger: Logger
    ) async throws -> Run {
        let warmup = (0..<options.warmup).map { "w\($0)" }
        let paymentsFile = folder.appendingPathComponent("payments.json")
        try JSONEncoder().encode(workload.payments + warmup.map { DemoBatch.payment($0, user: "wu-\($0)") })
            .write(to: paymentsFile)

        let simulator = try MeasuredProcess(
            executable: options.simulatorCommand[0],
            arguments: Array(options.simulatorCommand.dropFirst()) + [
                "--port", "0", "--app-id", Sandbox.appID, "--secret-key", Sandbox.secretKey, "--payments",
                paymentsFile.path, "--latency-ms", String(options.latencyMs), "--unknown-field-rate", "0",
            ], logPath: folder.appendingPathComponent("gamebase-sim.log").path)
        defer { simulator.kill9() }
        guard let simulatorURL = try await simulator.line(startingWith: "http", within: .seconds(60)) else {
            throw Failure(description: "the Gamebase simulator did not start:\n\(simulator.logTail())")
        }

        let cluster: any KafkaEndpoint
        var tansu: TansuBroker?
        switch options.broker {
        case .mock(let brokers): cluster = try MockCluster(brokers: brokers, logger: logger)
        case .tansu(let executable):
            let broker = try TansuBroker(executable: executable)
            tansu = broker
            cluster = broker
        }
        defer { tansu?.stop() }
        let topics = Sandbox.topicNames(prefix: "")
        for topic in Sandbox.topics(named: topics) {
            try cluster.createTopic(
                topic.name, partitions: topic.name == topics.purchases ? options.partitions : topic.partitions)
        }

        func measure(on ledgerURL: String) async throws -> Run {
            try await Self.measure(
                workload: workload, warmup: warmup, worker: worker, options: options, ledgerURL: ledgerURL,
                cluster: cluster, simulator: simulator, simulatorURL: simulatorURL, folder: folder, logger: logger)
        }
        guard let postgresURL = options.postgresURL else {
            return try await measure(on: "sqlite://" + folder.appendingPathComponent("ledger.sqlite").path)
        }
        let name = "iap_bench_\(UUID().uuidString.prefix(8).lowercased())"
        return try await PostgresLedgerStore.withScratchDatabase(
            named: name, on: try PostgresLedgerURL(postgresURL), logger: logger
        ) { scratch in
            guard var components = URLComponents(string: postgresURL) else {
                throw Failure(description: "--ledger-url cannot be read as a URL")
            }
            components.path = "/" + scratch.database
            guard let url = components.string else { throw Failure(description: "no URL for \(scratch.database)") }
            return try await measure(on: url)
        }
    }

    static func measure(
        workload: MixedWorkload, warmup: [String], worker: Worker, options: Options, ledgerURL: String,
        cluster: any KafkaEndpoint, simulator: MeasuredProcess, simulatorURL: String, folder: URL, logger: Logger
    ) async throws -> Run {
        let topic = Sandbox.topicNames(prefix: "").purchases
        var environment = [
            "IAP_WORKER_CONFIG": "", "KAFKA_BOOTSTRAP_SERVERS": cluster.bootstrapServers,
            "KAFKA_GROUP_ID": "bench-\(UUID().uuidString.prefix(8))", "GAMEBASE_BASE_URL": simulatorURL,
            "GAMEBASE_APP_ID": Sandbox.appID, "GAMEBASE_SECRET_KEY": Sandbox.secretKey, "LEDGER_URL": ledgerURL,
            "SERVER_PORT": "0", "CONSOLE_PORT": "0", "WORKER_MAX_IN_FLIGHT": String(options.maxInFlight),
            "GAMEBASE_MAX_CONNECTIONS": String(min(max(options.maxInFlight, 8), 1024)),
        ]
        // See docs/benchmarks.md, "Fetch wait": the mock answers an empty fetch only when its wait ends. An operator's
        // KAFKA_LIBRDKAFKA_FETCH_WAIT_MAX_MS wins, on any broker.
        if let wait = ProcessInfo.processInfo.environment["KAFKA_LIBRDKAFKA_FETCH_WAIT_MAX_MS"] {
            environment["KAFKA_LIBRDKAFKA_FETCH_WAIT_MAX_MS"] = wait
        } else if case .mock = options.broker {
            environment["KAFKA_LIBRDKAFKA_FETCH_WAIT_MAX_MS"] = "10"
        }
        // Only the system's variables: a GAMEBASE_* or WORKER_* of the operator's shell must not change the run.
        let process = try MeasuredProcess(
            executable: worker.executable, arguments: ["run"], environment: environment,
            inheriting: ["PATH", "HOME", "TMPDIR", "LANG", "LD_LIBRARY_PATH"],
            logPath: folder.appendingPathComponent("worker.log").path)
        defer { if process.isRunning { process.kill9() } }
        try await PipelineBenchmark.waitUntilReady(process, within: .seconds(60))
        guard let port = process.httpPort else { throw Failure(description: "the worker's HTTP port is not known") }
        let load = try LoadGenerator(bootstrapServers: cluster.bootstrapServers, topic: topic, logger: logger)
        _ = try await load.produce(count: warmup.count, rate: nil) { i in
            (warmup[i], Array(DemoBatch.message(warmup[i], user: "wu-\(warmup[i])").utf8), nil)
        }
        let before = try await waitForOutcomes(
            warmup.count, port: port, within: .seconds(120 + warmup.count / 50), process: process)

        let cpuBefore = process.cpuTime ?? .zero
        let simulatorCPUBefore = simulator.cpuTime ?? .zero
        let started = ContinuousClock.now
        let messages = workload.messages
        let samples = Mutex<[Double]>([])
        let sampler = Task {
            guard let interval = options.residentSampleInterval else { return }
            var tick = 1
            while (try? await Task.sleep(until: started + interval * tick, clock: .continuous)) != nil {
                guard let resident = process.memory?.resident else { return }
                samples.withLock { $0.append(Double(resident) / 1_048_576) }
                tick += 1
            }
        }
        defer { sampler.cancel() }
        let rate = options.pace.map { $0 * Double(messages.count) / Double(max(1, workload.valid)) }
        // Sent while a watcher looks at the worker every second: a worker that dies early in a paced run (a soak)
        // fails the run then, not when the last message has been sent.
        let sent = try await withThrowingTaskGroup(of: [String: Date].self) { group in
            group.addTask {
                try await load.produce(count: messages.count, rate: rate) { i in
                    (messages[i].key, messages[i].value, messages[i].validSeq)
                }
            }
            group.addTask {
                while process.isRunning { try await Task.sleep(for: .seconds(1)) }
                throw Failure(description: "the worker exited while the messages were sent:\n\(process.logTail())")
            }
            defer { group.cancelAll() }
            // The first to end: the producer's answer, or the watcher's error.
            guard let sent = try await group.next() else { throw CancellationError() }
            return sent
        }
        // A paced run is done sending when its time is up: what it still waits for is the worker's lag, which a
        // working worker clears in seconds. Otherwise the whole backlog is waited for.
        let drainLimit: Duration = .seconds(120 + (rate == nil ? messages.count / 50 : 0))
        var outcomes = try await waitForOutcomes(
            warmup.count + messages.count, port: port, within: drainLimit, process: process)
        let seconds = (ContinuousClock.now - started).seconds
        sampler.cancel()
        await sampler.value
        // The last sample falls due as the last message is sent: one the sampler missed by a few milliseconds is
        // taken now, so a run of N minutes has N samples.
        if let interval = options.residentSampleInterval,
            samples.withLock({ $0.count }) < Int(seconds / interval.seconds), let resident = process.memory?.resident
        {
            samples.withLock { $0.append(Double(resident) / 1_048_576) }
        }
        guard let cpuAfter = process.cpuTime, let memory = process.memory, let simulatorCPUAfter = simulator.cpuTime
        else { throw Failure(description: "the worker or the simulator was gone before its CPU time was read") }
        let cpu = cpuAfter - cpuBefore
        let simulatorCPU = simulatorCPUAfter - simulatorCPUBefore
        let peak = Double(memory.peak) / 1_048_576
        for (label, count) in before { outcomes[label, default: 0] -= count }
        let status = await process.terminate()
        await load.close()
        let owners = messages.compactMap { message in message.validSeq.map { ($0, message.owner ?? "") } }
        let grantedAmiss = try await LedgerStores.withStore(url: ledgerURL, logger: logger) { ledger in
            var amiss = 0
            for (seq, owner) in owners where try await ledger.grant(paymentSeq: seq)?.userId != owner { amiss += 1 }
            return amiss
        }

        let counters = try await simulatorCounters(simulatorURL)
        var histogram = Histogram<UInt64>(highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
        var notConsumed = 0
        for (seq, start) in sent {
            guard let end = counters.consumedAt[seq] else {
                notConsumed += 1
                continue
            }
            let micros = max(0, Double(end) * 1000 - start.timeIntervalSince1970 * 1_000_000)
            _ = histogram.record(UInt64(micros))
        }
        let cpuSeconds = cpu.seconds
        return Run(
            worker: worker.label, valid: workload.valid, messages: messages.count, seconds: seconds,
            workerCPUSeconds: cpuSeconds, workerCPUMicrosecondsPerMessage: cpuSeconds * 1e6 / Double(messages.count),
            workerCPUMicrosecondsPerValid: cpuSeconds * 1e6 / Double(workload.valid),
            simulatorCPUMicrosecondsPerMessage: simulatorCPU.seconds * 1e6 / Double(messages.count),
            messagesPerSecond: Double(messages.count) / seconds,
            p50Ms: Double(histogram.valueAtPercentile(50)) / 1000,
            p99Ms: Double(histogram.valueAtPercentile(99)) / 1000,
            peakRSSMiB: peak, outcomes: outcomes, notConsumed: notConsumed,
            consumedTwice: counters.consumes.values.filter { $0 > 1 }.count, grantedAmiss: grantedAmiss,
            expectedOutcomes: workload.expectedOutcomes, workerExitStatus: status.map(Int.init),
            residentSamplesMiB: options.residentSampleInterval == nil ? nil : samples.withLock { $0 })
    }

    /// Waits until the worker has counted `count` outcomes; returns its counts then (a scrape that fails is asked
    /// again, never read as none).
    static func waitForOutcomes(_ count: Int, port: Int, within limit: Duration, process: MeasuredProcess) async throws
        -> [String: Int]
    {
        let deadline = ContinuousClock.now + limit
        while true {
            let counts = await outcomeCounts(port: port)
            if counts.values.reduce(0, +) >= count { return counts }
            guard process.isRunning else {
                throw Failure(description: "the worker exited:\n\(process.logTail())")
            }
            guard ContinuousClock.now < deadline else {
                throw Failure(description: "not every message had an outcome within \(limit)")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// The worker's `iap_purchases_total` by outcome (empty while its metrics do not answer).
    static func outcomeCounts(port: Int) async -> [String: Int] {
        guard
            let response = try? await HTTPClient.shared.execute(
                HTTPClientRequest(url: "http://127.0.0.1:\(port)/metrics"), timeout: .seconds(2)),
            let body = try? await response.body.collect(upTo: 16 << 20)
        else { return [:] }
        var counts: [String: Int] = [:]
        for line in String(buffer: body).split(separator: "\n") where line.hasPrefix(WorkerMetrics.Name.purchases + "{")
        {
            guard let label = line.firstRange(of: #"outcome=""#).map({ line[$0.upperBound...].prefix { $0 != "\"" } }),
                let value = line.split(separator: " ").last.flatMap({ Double($0) })
            else { continue }
            counts[String(label), default: 0] += Int(value)
        }
        return counts
    }

    struct Counters: Decodable {
        var consumes: [String: Int]
        var consumedAt: [String: Int64]
    }

    static func simulatorCounters(_ url: String) async throws -> Counters {
        let response = try await HTTPClient.shared.execute(
            HTTPClientRequest(url: url + "/admin/counters"), timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 512 << 20)
        return try JSONDecoder().decode(Counters.self, from: Data(body.readableBytesView))
    }
}

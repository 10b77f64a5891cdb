import App
import Foundation
import Kafka
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// What one purchase cannot cost less than, each part measured alone in this process while its other side runs in
/// a process of its own: an HTTP/1.1 exchange over SwiftNIO against `iap-dev gamebase-sim` (a purchase makes two:
/// Get Payment Transaction and Consume), one message consumed and one produced through librdkafka with the
/// worker's own Kafka configuration against `iap-dev dev-kafka` (three mock brokers, twelve partitions), and one
/// page written and synced to a file (the group commit shares one among the purchases of a batch).
public enum FloorBenchmark {
    public struct Options: Sendable {
        /// `iap-dev`, for the simulator and the mock cluster.
        public var helperExecutable: String
        public var purchases = 20_000
        public var syncs = 2_000
        public var runs = 3
        /// In flight at once, as `worker.max_in_flight`.
        public var concurrency = 512

        public init(helperExecutable: String) {
            self.helperExecutable = helperExecutable
        }
    }

    public struct Result: Codable, Sendable {
        public var purchases: Int
        public var syncs: Int
        /// CPU µs per bare exchange, one per run.
        public var httpExchangeRuns: [Double]
        /// CPU µs per message consumed and event produced (delivery report and stored offset included), one per run.
        public var kafkaRuns: [Double]
        /// CPU µs per page written and synced, one per run.
        public var syncRuns: [Double]
        /// Wall µs per page written and synced (the disk's), one per run.
        public var syncWallRuns: [Double]

        public var httpExchange: Double { median(httpExchangeRuns) }
        public var kafka: Double { median(kafkaRuns) }
        public var sync: Double { median(syncRuns) }

        /// Two exchanges and one message each way: the floor without the ledger's sync.
        public var floorWithoutSync: Double { 2 * httpExchange + kafka }

        public var table: String {
            func µs(_ value: Double) -> String { String(format: "%.1f µs", value) }
            func runs(_ values: [Double]) -> String {
                values.map { String(format: "%.1f", $0) }.joined(separator: ", ")
            }
            return """
                part                                              CPU, median of \(httpExchangeRuns.count)   runs
                one HTTP/1.1 exchange (SwiftNIO, kept alive)      \(µs(httpExchange).padding(toLength: 14, withPad: " ", startingAt: 0))  \(runs(httpExchangeRuns))
                one message consumed + one produced (librdkafka)  \(µs(kafka).padding(toLength: 14, withPad: " ", startingAt: 0))  \(runs(kafkaRuns))
                one page written + fdatasync                      \(µs(sync).padding(toLength: 14, withPad: " ", startingAt: 0))  \(runs(syncRuns)) (wall \(String(format: "%.0f", median(syncWallRuns))) µs)
                floor per purchase: 2 exchanges + consume/produce = \(µs(floorWithoutSync)); with a sync of its own \
                \(µs(floorWithoutSync + sync)); k purchases sharing one commit add \(µs(sync)) / k each
                """
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    public static func run(_ options: Options, logger: Logger) async throws -> Result {
        var client = ClientBenchmark.Options(simulatorExecutable: options.helperExecutable)
        client.requests = options.purchases * 2
        client.concurrency = 32
        client.runs = options.runs
        client.clients = [.bare]
        let http = try await ClientBenchmark.run(client, logger: logger).runs.map(\.cpuMicrosecondsPerRequest)
        let kafka = try await kafkaRuns(options, logger: logger)
        var syncs: [Double] = []
        var walls: [Double] = []
        for _ in 0..<options.runs {
            let (cpu, wall) = try syncRun(options.syncs)
            syncs.append(cpu)
            walls.append(wall)
        }
        return Result(
            purchases: options.purchases, syncs: options.syncs, httpExchangeRuns: http, kafkaRuns: kafka,
            syncRuns: syncs, syncWallRuns: walls)
    }

    // MARK: Kafka

    static let purchasesTopic = "floor-purchases"
    static let eventsTopic = "floor-events"

    private static func kafkaRuns(_ options: Options, logger: Logger) async throws -> [Double] {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "iap-bench-floor-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let cluster = try MeasuredProcess(
            executable: options.helperExecutable,
            arguments: [
                "dev-kafka", "--brokers", "3", "--topic", "\(purchasesTopic):12", "--topic", "\(eventsTopic):12",
            ],
            logPath: folder.appendingPathComponent("kafka.log").path)
        defer { cluster.kill9() }
        guard let bootstrap = try await cluster.line(startingWith: "127.0.0.1:", within: .seconds(30)) else {
            throw Failure(description: "the mock cluster did not start:\n\(cluster.logTail())")
        }
        var runs: [Double] = []
        for run in 0..<options.runs {
            try await fill(bootstrap: bootstrap, count: options.purchases, run: run, logger: logger)
            runs.append(
                try await consumeAndProduce(bootstrap: bootstrap, options: options, run: run, logger: logger))
        }
        _ = await cluster.terminate(within: 10)
        return runs
    }

    /// A purchase-completed message as the game servers send it (~200 bytes).
    static func purchase(_ index: Int, run: Int) -> KafkaProducerRecord {
        let user = "user-\(run)-\(index % 5_000)"
        let value =
            #"{"userId":"\#(user)","paymentSeq":"2026112910\#(String(format: "%08d", index))","purchaseToken":"#
            + #""floor-token-\#(index)-abcdefghijklmnopqrstuvwxyz0123456789"}"#
        return KafkaProducerRecord(topic: purchasesTopic, key: Array(user.utf8), value: Array(value.utf8))
    }

    /// An item-granted event of the size the worker produces (~800 bytes of CloudEvent, its headers).
    static let event: [UInt8] = Array(String(repeating: "e", count: 800).utf8)

    private static func fill(bootstrap: String, count: Int, run: Int, logger: Logger) async throws {
        let producer = try KafkaProducer(
            configuration: .init(bootstrapServers: bootstrap, properties: ["linger.ms": "5"]), logger: logger)
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for start in stride(from: 0, to: count, by: 1_000) {
                    group.addTask {
                        for index in start..<min(count, start + 1_000) {
                            _ = try await producer.send(purchase(index, run: run))
                        }
                    }
                }
                try await group.waitForAll()
            }
        } catch {
            await producer.close()
            throw error
        }
        await producer.close()
    }

    /// CPU µs per message: read with the worker's consumer configuration, one event produced per message with its
    /// delivery report awaited, then its offset stored; `concurrency` messages in flight.
    private static func consumeAndProduce(bootstrap: String, options: Options, run: Int, logger: Logger) async throws
        -> Double
    {
        var configuration = WorkerConfiguration()
        configuration.bootstrapServers = bootstrap
        configuration.groupID = "floor-\(run)"
        configuration.librdkafka = [
            "session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "fetch.wait.max.ms": "10",
            "auto.offset.reset": "earliest",
        ]
        let consumer = try KafkaConsumer(configuration: configuration.consumerConfiguration, logger: logger)
        let producer = try KafkaProducer(configuration: configuration.producerConfiguration, logger: logger)
        try consumer.subscribe(topics: [purchasesTopic])
        var cpuBefore: Duration?
        var received = 0
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                var inFlight = 0
                for try await message in consumer.messages {
                    // The clock starts with the first message: the group's join is not a purchase's.
                    if cpuBefore == nil { cpuBefore = MeasuredProcess.harnessCPUTime }
                    if inFlight == options.concurrency {
                        try await group.next()
                        inFlight -= 1
                    }
                    group.addTask {
                        _ = try await producer.send(
                            KafkaProducerRecord(topic: eventsTopic, key: message.key, value: event))
                        try consumer.storeOffset(for: message)
                    }
                    inFlight += 1
                    received += 1
                    if received == options.purchases { break }
                }
                try await group.waitForAll()
            }
        } catch {
            await producer.close()
            await consumer.close()
            throw error
        }
        try await consumer.commit()
        let cpu = MeasuredProcess.harnessCPUTime - (cpuBefore ?? MeasuredProcess.harnessCPUTime)
        await producer.close()
        await consumer.close()
        guard received == options.purchases else {
            throw Failure(description: "read \(received) of \(options.purchases) messages")
        }
        return cpu / .microseconds(1) / Double(received)
    }

    // MARK: The sync

    /// CPU and wall µs per 4 KiB page written (`pwrite`) and synced (`fdatasync`) to a file in the temporary
    /// directory: the one sync a group commit cannot avoid.
    static func syncRun(_ count: Int) throws -> (cpu: Double, wall: Double) {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "iap-bench-floor-\(UUID().uuidString.prefix(8)).sync"
        ).path
        let descriptor = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0 else { throw Failure(description: "cannot open \(path): errno \(errno)") }
        defer {
            close(descriptor)
            unlink(path)
        }
        let page = [UInt8](repeating: 0x5a, count: 4_096)
        let cpuBefore = MeasuredProcess.harnessCPUTime
        let started = ContinuousClock.now
        for index in 0..<count {
            let written = page.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(index * 4_096)) }
            guard written == page.count, fdatasync(descriptor) == 0 else {
                throw Failure(description: "write or sync failed: errno \(errno)")
            }
        }
        let cpu = (MeasuredProcess.harnessCPUTime - cpuBefore) / .microseconds(1)
        let wall = (ContinuousClock.now - started) / .microseconds(1)
        return (cpu / Double(count), wall / Double(count))
    }
}

private func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

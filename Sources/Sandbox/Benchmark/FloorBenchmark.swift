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
        /// Where the synced file is written (the temporary directory by default; a ledger's disk may differ, and a
        /// tmpfs syncs nothing).
        public var syncDirectory: String?

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
        client.folderPrefix = "iap-bench-floor-"
        let http = try await ClientBenchmark.run(client, logger: logger).runs.map(\.cpuMicrosecondsPerRequest)
        let kafka = try await kafkaRuns(options, logger: logger)
        var syncs: [Double] = []
        var walls: [Double] = []
        for _ in 0..<options.runs {
            let (cpu, wall) = try syncRun(
                options.syncs,
                directory: options.syncDirectory.map { URL(fileURLWithPath: $0) }
                    ?? FileManager.default.temporaryDirectory)
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
        // A topic of its own for each run: a run reads what it filled and nothing a run before it left.
        let topics = (0..<options.runs).flatMap { ["--topic", "\(purchasesTopic)-\($0):12"] }
        let cluster = try MeasuredProcess(
            executable: options.helperExecutable,
            arguments: ["dev-kafka", "--brokers", "3", "--topic", "\(eventsTopic):12"] + topics,
            logPath: folder.appendingPathComponent("kafka.log").path)
        defer { cluster.kill9() }
        guard let bootstrap = try await cluster.line(startingWith: "127.0.0.1:", within: .seconds(30)) else {
            throw Failure(description: "the mock cluster did not start:\n\(cluster.logTail())")
        }
        var runs: [Double] = []
        for run in 0..<options.runs {
            let topic = "\(purchasesTopic)-\(run)"
            try await fill(topic, bootstrap: bootstrap, count: options.purchases, logger: logger)
            runs.append(
                try await consumeAndProduce(topic, bootstrap: bootstrap, options: options, run: run, logger: logger))
        }
        _ = await cluster.terminate(within: 10)
        return runs
    }

    /// A purchase-completed message as the game servers send it (~200 bytes).
    static func purchase(_ index: Int, topic: String) -> KafkaProducerRecord {
        let user = "user-\(index % 5_000)"
        let value =
            #"{"userId":"\#(user)","paymentSeq":"2026112910\#(String(format: "%08d", index))","purchaseToken":"#
            + #""floor-token-\#(index)-abcdefghijklmnopqrstuvwxyz0123456789"}"#
        return KafkaProducerRecord(topic: topic, key: Array(user.utf8), value: Array(value.utf8))
    }

    /// An item-granted event of the size the worker produces: ~800 bytes of data and a CloudEvent's headers.
    static let event: [UInt8] = Array(String(repeating: "e", count: 800).utf8)
    static let eventHeaders = [
        KafkaHeader(name: "ce_specversion", string: "1.0"),
        KafkaHeader(name: "ce_id", string: "6f1c2a4e-8b3d-4c5e-9f7a-1b2c3d4e5f60"),
        KafkaHeader(name: "ce_source", string: "//iap-worker/floor"),
        KafkaHeader(name: "ce_type", string: "com.nhncloud.gamebase.iap.item-granted"),
        KafkaHeader(name: "ce_time", string: "2026-11-29T10:20:30.123Z"),
        KafkaHeader(name: "content-type", string: "application/json"),
    ]

    private static func fill(_ topic: String, bootstrap: String, count: Int, logger: Logger) async throws {
        let producer = try KafkaProducer(
            configuration: .init(
                bootstrapServers: bootstrap, properties: ["linger.ms": "5", "message.timeout.ms": "30000"]),
            logger: logger)
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for start in stride(from: 0, to: count, by: 1_000) {
                    group.addTask {
                        for index in start..<min(count, start + 1_000) {
                            _ = try await producer.send(purchase(index, topic: topic))
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
    /// delivery report awaited, then its offset stored; `concurrency` messages in flight. The clock starts at the
    /// tenth of the messages (the group's join and the first fetches are not a purchase's) and stops when the last
    /// event is delivered, before the final commit.
    private static func consumeAndProduce(
        _ topic: String, bootstrap: String, options: Options, run: Int, logger: Logger
    ) async throws -> Double {
        var configuration = WorkerConfiguration()
        configuration.bootstrapServers = bootstrap
        configuration.groupID = "floor-\(run)"
        configuration.librdkafka = [
            "session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "fetch.wait.max.ms": "10",
            "auto.offset.reset": "earliest",
        ]
        let consumer = try KafkaConsumer(configuration: configuration.consumerConfiguration, logger: logger)
        let producer: KafkaProducer
        do {
            producer = try KafkaProducer(configuration: configuration.producerConfiguration, logger: logger)
        } catch {
            await consumer.close()
            throw error
        }
        // Whatever ends the run early (a cluster gone, a run over its time, Ctrl-C) closes the consumer, which ends
        // the loop below.
        let deadline = ContinuousClock.now + .seconds(60) + .milliseconds(options.purchases)
        let timer = Task {
            try await Task.sleep(until: deadline)
            consumer.initiateClose()
        }
        let warm = options.purchases / 10
        var cpuFrom: Duration?
        var cpuTo: Duration?
        var received = 0
        do {
            try consumer.subscribe(topics: [topic])
            try await withTaskCancellationHandler {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    var inFlight = 0
                    for try await message in consumer.messages {
                        if received == warm { cpuFrom = MeasuredProcess.harnessCPUTime }
                        if inFlight == options.concurrency {
                            try await group.next()
                            inFlight -= 1
                        }
                        group.addTask {
                            _ = try await producer.send(
                                KafkaProducerRecord(
                                    topic: eventsTopic, key: message.key, value: event, headers: eventHeaders))
                            try consumer.storeOffset(for: message)
                        }
                        inFlight += 1
                        received += 1
                        if received == options.purchases { break }
                    }
                    try await group.waitForAll()
                    cpuTo = MeasuredProcess.harnessCPUTime
                }
            } onCancel: {
                consumer.initiateClose()
            }
            timer.cancel()
            try await consumer.commit()
        } catch {
            timer.cancel()
            await producer.close()
            await consumer.close()
            throw error
        }
        await producer.close()
        await consumer.close()
        try Task.checkCancellation()
        guard received == options.purchases, let cpuFrom, let cpuTo else {
            throw Failure(
                description:
                    "read \(received) of \(options.purchases) messages before the run's deadline or the consumer's end")
        }
        return (cpuTo - cpuFrom) / .microseconds(1) / Double(options.purchases - warm)
    }

    // MARK: The sync

    /// CPU and wall µs per 4 KiB page written (`pwrite`) and synced (`fdatasync`): the one sync a group commit
    /// cannot avoid. The file is laid out and synced first and then overwritten in place, as SQLite's log is once it
    /// has reached its size, so a sync carries the page and not the file's growth.
    static func syncRun(_ count: Int, directory: URL) throws -> (cpu: Double, wall: Double) {
        let path = directory.appendingPathComponent("iap-bench-floor-\(UUID().uuidString.prefix(8)).sync").path
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else { throw Failure(description: "cannot create \(path): errno \(errno)") }
        defer {
            close(descriptor)
            unlink(path)
        }
        let page = [UInt8](repeating: 0x5a, count: 4_096)
        let pages = 64
        func write(_ index: Int) throws {
            let written = page.withUnsafeBytes {
                pwrite(descriptor, $0.baseAddress, $0.count, off_t((index % pages) * page.count))
            }
            guard written == page.count else { throw Failure(description: "write to \(path) failed: errno \(errno)") }
        }
        for index in 0..<pages { try write(index) }
        guard fsync(descriptor) == 0 else { throw Failure(description: "sync of \(path) failed: errno \(errno)") }
        let cpuBefore = MeasuredProcess.harnessCPUTime
        let started = ContinuousClock.now
        for index in 0..<count {
            try write(index)
            guard fdatasync(descriptor) == 0 else {
                throw Failure(description: "sync of \(path) failed: errno \(errno)")
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

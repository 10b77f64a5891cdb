import AsyncHTTPClient
import Dispatch
import Foundation
import IAPTestSupport
import KafkaTesting
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

#if canImport(Glibc)
    import Glibc
#endif

/// Runs the built executables as separate processes, as a user would: `iap-worker` for the operator's commands,
/// `iap-dev` for the development tools (`dev-kafka`, `gamebase-sim`, `demo`, `bench`).
final class ChildProcess: @unchecked Sendable {
    // @unchecked: `process` is only touched through Foundation's thread-safe Process API after start.
    let process: Process
    let name: String
    let stdoutPath: String
    let stderrPath: String

    static var executable: String {
        if let path = ProcessInfo.processInfo.environment["IAP_WORKER_BIN"] { return path }
        return root.appendingPathComponent(".build/debug/iap-worker").path
    }

    /// The development tools' executable.
    static var devExecutable: String {
        if let path = ProcessInfo.processInfo.environment["IAP_DEV_BIN"] { return path }
        return root.appendingPathComponent(".build/debug/iap-dev").path
    }

    static let devCommands: Set<String> = [
        "dev-kafka", "gamebase-sim", "app-store-sim", "google-play-sim", "demo", "bench",
    ]

    private static var root: URL {
        TestRepository.root
    }

    /// Starts `iap-worker arguments…`, or `iap-dev arguments…` for a development tool (`executable`: another build's,
    /// say the previous version's); stdout and stderr go to two files in `folder`.
    /// - Parameter output: where stdout and stderr go instead of the two files (a pipe whose reader is gone, a file
    ///   on a full disk); the output helpers then read nothing.
    init(
        _ name: String, _ arguments: [String], environment: [String: String] = [:], folder: URL,
        executable: String? = nil, output: FileHandle? = nil
    ) throws {
        self.name = name
        let stem = folder.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(6))").path
        stdoutPath = stem + ".out"
        stderrPath = stem + ".err"
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process = Process()
        // IAP_WORKER_RUN_BIN runs the worker (and reprocess) from another build, say the code before a fix, against
        // this build's dev-kafka and gamebase-sim: how a new test is seen failing on the old code.
        let command = arguments.first ?? ""
        let underTest = ["run", "reprocess"].contains(command)
        let built = Self.devCommands.contains(command) ? Self.devExecutable : Self.executable
        let chosen = underTest ? ProcessInfo.processInfo.environment["IAP_WORKER_RUN_BIN"] ?? built : built
        process.executableURL = URL(fileURLWithPath: executable ?? chosen)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        process.environment = env
        process.standardOutput = try output ?? FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
        process.standardError = try output ?? FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    /// The first line the process printed on stdout (the bootstrap servers, the simulator's URL).
    func firstLine(within seconds: Double = 20) async throws -> String {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: stdoutPath, encoding: .utf8),
                let newline = text.firstIndex(of: "\n")
            {
                return String(text[..<newline])
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw ProcessTestError("\(name) printed nothing within \(seconds) s")
    }

    /// Everything the process wrote, stdout then stderr (the worker logs to stdout by default).
    var output: String {
        [stdoutPath, stderrPath].map { (try? String(contentsOfFile: $0, encoding: .utf8)) ?? "" }.joined(
            separator: "\n")
    }

    /// What explains a failure: every line but the routine per-purchase ones (rebalances, circuit, sweeps,
    /// warnings, errors), then the last lines as they came.
    var diagnosticOutput: String {
        let lines = output.split(separator: "\n")
        let unusual = lines.filter {
            !$0.contains(#""msg":"purchase granted""#) && !$0.contains(#""msg":"purchase duplicate""#)
        }
        return "\(name), \(lines.count) lines; all but per-purchase lines (last 60):\n"
            + unusual.suffix(60).joined(separator: "\n") + "\n\(name), last lines:\n"
            + lines.suffix(15).joined(separator: "\n")
    }

    /// Waits until the process catches SIGTERM (`SigCgt` of /proc/<pid>/status): from then on the worker, not the
    /// default action, decides what a SIGTERM does. Before it, only the dynamic loader has run.
    func waitUntilCatchingSIGTERM(within seconds: Double = 20) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            guard process.isRunning else { throw ProcessTestError("\(name) exited before it caught SIGTERM") }
            if let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigCgt:") }),
                let mask = UInt64(line.dropFirst("SigCgt:".count).trimmingCharacters(in: .whitespaces), radix: 16),
                mask & (1 << (UInt64(SIGTERM) - 1)) != 0
            {
                return
            }
            try await Task.sleep(for: .milliseconds(1))
        }
        throw ProcessTestError("\(name) did not catch SIGTERM within \(seconds) s of its start")
    }

    func kill9() {
        kill(pid, SIGKILL)
        process.waitUntilExit()
    }

    /// Sends SIGTERM and waits; returns the exit status (a death by signal is the signal's number: see
    /// ``endedBySignal``).
    func terminate(within seconds: Double = 60) async throws -> Int32 {
        kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning {
            guard Date() < deadline else {
                kill(pid, SIGKILL)
                throw ProcessTestError("\(name) did not exit within \(seconds) s of SIGTERM")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return process.terminationStatus
    }

    /// Whether the process, ended, was ended by a signal rather than by exiting.
    var endedBySignal: Bool { !process.isRunning && process.terminationReason == .uncaughtSignal }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

struct ProcessTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// `GET /admin/counters` of a simulator process.
func simulatorConsumes(_ baseURL: String) async throws -> [String: Int] {
    let response = try await HTTPClient.shared.execute(
        HTTPClientRequest(url: "\(baseURL)/admin/counters"), timeout: .seconds(5))
    let body = try await response.body.collect(upTo: 64 << 20)
    let object = try JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any]
    return (object?["consumes"] as? [String: Int]) ?? [:]
}

extension ChildProcess {
    /// The JSON log lines written so far, parsed (other lines are skipped).
    var logLines: [[String: Any]] {
        output.split(separator: "\n").compactMap { line in
            guard line.first == "{" else { return nil }
            return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    /// Log lines whose message contains `text`.
    func logLines(containing text: String) -> [[String: Any]] {
        logLines.filter { ($0["msg"] as? String)?.contains(text) == true }
    }

    /// Waits until a log message contains `text`; fails when the process exits first or after `seconds`.
    @discardableResult
    func waitForLog(_ text: String, within seconds: Double = 60) async throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let line = logLines(containing: text).first { return line }
            guard isRunning else {
                throw ProcessTestError("\(name) exited before logging \"\(text)\":\n\(diagnosticOutput)")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ProcessTestError("\(name) did not log \"\(text)\" within \(seconds) s:\n\(diagnosticOutput)")
    }

    /// The port of its `/metrics`, `/healthz` and `/readyz`, once it listens.
    func adminPort() async throws -> Int {
        let line = try await waitForLog("HTTP endpoints listening")
        guard let port = (line["http.port"] as? String).flatMap({ Int($0) }) else {
            throw ProcessTestError("no http.port in \(line)")
        }
        return port
    }

    /// Outcomes logged so far (`iap.outcome`), counted.
    var outcomeCounts: [String: Int] {
        logLines.reduce(into: [:]) { counts, line in
            if let outcome = line["iap.outcome"] as? String { counts[outcome, default: 0] += 1 }
        }
    }
}

/// GET `url`: the status and body.
func httpGet(_ url: String) async throws -> (status: Int, body: String) {
    let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(5))
    let body = try await response.body.collect(upTo: 16 << 20)
    return (Int(response.status.code), String(buffer: body))
}

extension ChildProcess {
    /// Waits for the process to exit by itself and returns its status; kills it and throws, with its output, if it
    /// is still running after `seconds`.
    func exitStatus(within seconds: Double = 60) async throws -> Int32 {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning {
            guard Date() < deadline else {
                kill9()
                throw ProcessTestError("\(name) did not exit within \(seconds) s:\n\(diagnosticOutput)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return process.terminationStatus
    }
}

/// The Kafka endpoint of the process tests: `iap-dev dev-kafka` (librdkafka's mock cluster) as a process, or a Tansu
/// broker process when `IAP_TEST_KAFKA_BROKER=tansu`. Either is stopped when this is released.
final class KafkaUnderTest: Sendable {
    let bootstrapServers: String
    let kind: KafkaEndpointKind
    private let devKafka: ChildProcess?
    private let tansu: TansuBroker?

    private init(bootstrapServers: String, kind: KafkaEndpointKind, devKafka: ChildProcess?, tansu: TansuBroker?) {
        self.bootstrapServers = bootstrapServers
        self.kind = kind
        self.devKafka = devKafka
        self.tansu = tansu
    }

    /// Starts the endpoint under test with `topics` (name, partitions) created.
    static func start(
        topics: [(name: String, partitions: Int)], kind: KafkaEndpointKind = .underTest, folder: URL
    ) async throws -> KafkaUnderTest {
        switch kind {
        case .mock:
            let process = try ChildProcess(
                "dev-kafka",
                ["dev-kafka", "--brokers", "1"] + topics.flatMap { ["--topic", "\($0.name):\($0.partitions)"] },
                folder: folder)
            return KafkaUnderTest(
                bootstrapServers: try await process.firstLine(), kind: kind, devKafka: process, tansu: nil)
        case .tansu:
            let broker = try TansuBroker()
            for topic in topics { try broker.createTopic(topic.name, partitions: topic.partitions) }
            return KafkaUnderTest(bootstrapServers: broker.bootstrapServers, kind: kind, devKafka: nil, tansu: broker)
        }
    }

    /// The broker's own output, for a failure's explanation.
    var diagnosticOutput: String {
        if let devKafka { return devKafka.diagnosticOutput }
        if let tansu { return (try? String(contentsOfFile: tansu.logPath, encoding: .utf8)) ?? "" }
        return ""
    }
}

extension ChildProcess {
    /// The partitions of `topic` the worker holds by its log ("partitions assigned", "partitions revoking" and
    /// "partitions lost" lines replayed in order), with the number of such lines so far.
    func assignment(of topic: String) -> (partitions: Set<Int>, changes: Int) {
        var held: Set<Int> = []
        var changes = 0
        for line in output.split(separator: "\n") {
            let assigned = line.contains(#""msg":"partitions assigned""#)
            guard
                assigned || line.contains(#""msg":"partitions revoking""#)
                    || line.contains(#""msg":"partitions lost""#),
                let list = line.range(of: #""kafka.partitions":"["#)
            else { continue }
            changes += 1
            // "[purchase.completed[2], purchase.completed[5]]"
            let items = line[list.upperBound...].prefix { $0 != "\"" }.dropLast().split(separator: ",")
            for item in items {
                let entry = item.trimmingCharacters(in: .whitespaces)
                guard entry.hasPrefix(topic + "["), entry.hasSuffix("]"),
                    let partition = Int(entry.dropFirst(topic.count + 1).dropLast())
                else { continue }
                if assigned { held.insert(partition) } else { held.remove(partition) }
            }
        }
        return (held, changes)
    }
}

extension ProcessCluster {
    /// Waits until `workers` together hold each of the purchase topic's `partitions` exactly once, each holds one at
    /// least (a member that joined has been through its assignment, not only asked for one) and none of them has
    /// logged a rebalance for `quiet` seconds: the group has formed around its current members.
    func waitUntilGroupSettled(
        _ workers: [ChildProcess], partitions: Int = 6, quiet: Double = 2, within seconds: Double = 120
    ) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        var lastChanges = -1
        var quietSince = Date()
        while Date() < deadline {
            let assignments = workers.map { $0.assignment(of: "purchase.completed") }
            let changes = assignments.map(\.changes).reduce(0, +)
            if changes != lastChanges {
                lastChanges = changes
                quietSince = Date()
            }
            let held = assignments.map(\.partitions.count).reduce(0, +)
            let covered = assignments.reduce(into: Set<Int>()) { $0.formUnion($1.partitions) }
            if held == partitions, covered == Set(0..<partitions), assignments.allSatisfy({ !$0.partitions.isEmpty }),
                Date().timeIntervalSince(quietSince) >= quiet
            {
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ProcessTestError(
            "the group of \(workers.map(\.name)) did not settle within \(seconds) s: "
                + workers.map { "\($0.name) holds \($0.assignment(of: "purchase.completed").partitions.sorted())" }
                .joined(separator: ", ") + "\n" + workers.map(\.diagnosticOutput).joined(separator: "\n"))
    }
}

import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// A failure to start or drive a ``TansuBroker``.
public struct TansuBrokerError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// Tansu (a Kafka-compatible broker written in Rust, Apache-2.0) as a child process on a loopback port, with in-memory
/// storage: the real broker of the tests. Each instance starts its own process and stops it in ``stop()`` or when
/// released, or its watchdog does when this process is gone; it never uses a broker it did not start.
///
/// Tansu is one broker (no replication) and differs from librdkafka's mock cluster in ways the tests rely on
/// (docs/compatibility.md): groups form as soon as a member joins, and its ListOffsets answer for the latest offset
/// is not the partition's end.
public final class TansuBroker: KafkaEndpoint, @unchecked Sendable {
    // @unchecked: `process` is only touched through Foundation's thread-safe Process API after start.
    public let bootstrapServers: String
    private let port: Int
    /// The broker's own output (its log): what explains a failure.
    public let logPath: String
    /// Where the watchdog wrote the broker's pid.
    private let pidPath: String
    private let executable: String
    private let process: Process

    /// The Tansu executable of the tests: `IAP_TEST_TANSU`, which `scripts/test-lanes.py` sets from
    /// `scripts/kafka-tools.sh tansu`.
    public static func executableFromEnvironment() throws -> String {
        guard let path = ProcessInfo.processInfo.environment["IAP_TEST_TANSU"], !path.isEmpty else {
            throw TansuBrokerError(
                "IAP_TEST_TANSU is not set: point it at a Tansu binary (scripts/kafka-tools.sh tansu installs one)")
        }
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TansuBrokerError("IAP_TEST_TANSU is \(path), which is not an executable file")
        }
        return path
    }

    /// Starts a broker of the Tansu the tests name (``executableFromEnvironment()``).
    public convenience init() throws {
        try self.init(executable: Self.executableFromEnvironment())
    }

    /// Starts a broker on a free loopback port and waits until it accepts connections.
    public init(executable: String) throws {
        self.executable = executable
        var lastFailure = "not started"
        // A port found free can be taken before the broker binds it: then the broker exits and another is tried.
        for _ in 0..<5 {
            let port = try freeLoopbackPort()
            let log = FileManager.default.temporaryDirectory.appendingPathComponent(
                "tansu-\(port)-\(UUID().uuidString.prefix(6)).log")
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            let process = Process()
            let url = "tcp://127.0.0.1:\(port)"
            // The broker runs under a watchdog shell that stops it when this process is gone (a test process that
            // crashed or was killed must not leave a broker behind), or when ``stop()`` kills the broker.
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = [
                "-c", Self.watchdog, "tansu-watchdog", String(getpid()), log.path + ".pid", executable, "broker",
                "--listener-url", url,
                "--advertised-listener-url", url, "--storage-engine", "memory://tansu/",
            ]
            // Only what the broker needs: settings of the caller's environment (STORAGE_ENGINE, LISTENER_URL, …) are
            // Tansu's too and must not reach it.
            var environment = ["PATH": "/usr/bin:/bin"]
            environment["RUST_LOG"] = ProcessInfo.processInfo.environment["IAP_TEST_TANSU_LOG"] ?? "warn"
            process.environment = environment
            let handle = try FileHandle(forWritingTo: log)
            process.standardOutput = handle
            process.standardError = handle
            try process.run()
            if Self.waitUntilListening(port: port, process: process, seconds: 15) {
                self.port = port
                self.bootstrapServers = "127.0.0.1:\(port)"
                self.logPath = log.path
                self.pidPath = log.path + ".pid"
                self.process = process
                return
            }
            _ = Self.stopBroker(pidFile: log.path + ".pid", watchdog: process)
            lastFailure = (try? String(contentsOf: log, encoding: .utf8)) ?? "no output"
            try? FileManager.default.removeItem(at: log)
            try? FileManager.default.removeItem(atPath: log.path + ".pid")
        }
        throw TansuBrokerError("Tansu did not start listening: \(lastFailure.suffix(2_000))")
    }

    deinit {
        stop()
    }

    /// `sh -c` script: runs `$3…` in the background, writes its pid to file `$2`, and waits while it, process `$1` and
    /// that file all live; then kills it (unless it ended on its own) and ends once it is dead. A zombie not reaped yet
    /// counts as gone: a busy init reaps late. ``stop()`` removes the file: the kill is the watchdog's, which still
    /// holds its child unreaped, so it cannot hit another process that was given a dead broker's pid. Signals only
    /// SIGKILL: a child of a test process inherits the signals its parent ignores (SIGTERM, for the services' signal
    /// handlers), and a shell cannot trap an ignored signal.
    ///
    /// No `wait` builtin: in a loaded test lane dash's `wait` for the killed broker twice slept in sigsuspend for good
    /// (why it missed the SIGCHLD is not known: dash clears the signal mask it inherits, and it did not hang alone),
    /// and the watchdog holds the test runner's output open, so `swift test` never ended. Polling with foreground
    /// `sleep`s waits by a blocking wait3, which needs no signal and reaps the killed broker on the way.
    package static let watchdog = """
        parent=$1; pidfile=$2; shift 2
        "$@" & child=$!
        echo $child > "$pidfile"
        alive() { state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) && [ "${state%% *}" != Z ]; }
        while alive "$parent" && alive "$child" && [ -e "$pidfile" ]; do sleep 0.2; done
        alive "$child" && kill -9 $child 2>/dev/null
        while alive "$child"; do sleep 0.1; done
        """

    /// Asks the watchdog whose pid file is `pidFile` to stop its broker (by removing the file) and waits up to five
    /// seconds for it to end; false when it did not.
    private static func stopBroker(pidFile: String, watchdog: Process) -> Bool {
        // The broker's pid, read before the file goes: the last resort below needs it.
        let broker = (try? String(contentsOfFile: pidFile, encoding: .utf8)).flatMap {
            Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        try? FileManager.default.removeItem(atPath: pidFile)
        let deadline = Date().addingTimeInterval(5)
        while watchdog.isRunning, Date() < deadline { usleep(20_000) }
        guard watchdog.isRunning else { return true }
        // A watchdog that did not end: it and then its broker are killed (its broker, still its child, keeps its pid).
        if let broker { kill(broker, SIGKILL) }
        kill(watchdog.processIdentifier, SIGKILL)
        watchdog.waitUntilExit()
        return false
    }

    /// The broker's pid, as its watchdog wrote it (for the tests of the watchdog).
    package var brokerProcessIdentifier: Int32? {
        (try? String(contentsOfFile: pidPath, encoding: .utf8)).flatMap {
            Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    /// Whether the broker's watchdog still runs.
    package var watchdogIsRunning: Bool { process.isRunning }

    /// Stops the broker (SIGKILL, by its watchdog: it keeps nothing worth a clean shutdown), waits for its watchdog to
    /// end and removes its log if the broker wrote nothing to it.
    public func stop() {
        _ = Self.stopBroker(pidFile: pidPath, watchdog: process)
        // A log with anything in it (Tansu logs warnings and errors only) is kept: it explains a failure.
        if (try? FileManager.default.attributesOfItem(atPath: logPath)[.size] as? Int) == 0 {
            try? FileManager.default.removeItem(atPath: logPath)
        }
    }

    /// Creates a topic with Tansu's own command line (CreateTopics over the Kafka protocol).
    public func createTopic(_ name: String, partitions: Int) throws {
        let command = Process()
        command.executableURL = URL(fileURLWithPath: executable)
        command.arguments = [
            "topic", "create", name, "--partitions", String(partitions), "--broker", "tcp://127.0.0.1:\(port)",
        ]
        command.environment = ["PATH": "/usr/bin:/bin", "RUST_LOG": "error"]
        let output = Pipe()
        command.standardOutput = output
        command.standardError = output
        try command.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        command.waitUntilExit()
        guard command.terminationStatus == 0 else {
            throw TansuBrokerError(
                "tansu topic create \(name) exited \(command.terminationStatus): \(text.suffix(1_000))")
        }
    }

    private static func waitUntilListening(port: Int, process: Process, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            guard process.isRunning else { return false }
            if canConnect(port: port) { return true }
            usleep(20_000)
        }
        return false
    }

    private static func canConnect(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopbackAddress(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

extension KafkaEndpointKind {
    /// Starts an endpoint of this kind: a mock cluster of `mockBrokers` brokers, or a Tansu broker (one broker; the
    /// executable from `IAP_TEST_TANSU`).
    public func start(mockBrokers: Int = 1, logger: Logger) throws -> any KafkaEndpoint {
        switch self {
        case .mock: return try MockCluster(brokers: mockBrokers, logger: logger)
        case .tansu: return try TansuBroker()
        }
    }
}

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A separate `iap-worker` process — the worker as deployed, or the simulator — with its CPU time and memory
/// read from `/proc`; its stdout and stderr go to one log file.
final class MeasuredProcess: @unchecked Sendable {
    // @unchecked: `process` is only used through Foundation's thread-safe Process API after `run()`.
    private let process: Process
    let logPath: String

    /// - Parameter inheriting: the variables of this process's environment the child gets besides `environment`; nil
    ///   passes all of them.
    init(
        executable: String, arguments: [String], environment: [String: String] = [:],
        inheriting: Set<String>? = nil, logPath: String
    ) throws {
        self.logPath = logPath
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.filter { inheriting?.contains($0.key) ?? true }
            .merging(environment) { $1 }
        process.standardOutput = log
        process.standardError = log
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    /// The last `bytes` of the log, for an error that says why the process stopped. Read from the end: after a soak
    /// a worker's log is hundreds of megabytes, and reading it whole to keep its last lines held them all at once.
    func logTail(bytes: Int = 2_000) -> String {
        guard let handle = FileHandle(forReadingAtPath: logPath) else { return "" }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 0
        let wanted = UInt64(max(0, bytes))
        guard (try? handle.seek(toOffset: size > wanted ? size - wanted : 0)) != nil else { return "" }
        // A cut through a multi-byte character reads as U+FFFD: the tail is for people.
        return String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
    }

    /// User plus system CPU time so far (`/proc/PID/stat` fields 14 and 15).
    var cpuTime: Duration? { ProcStat.cpuTime(statFile: "/proc/\(pid)/stat") }

    /// CPU time (user and system) of this process, the bench harness, from `getrusage`.
    static var harnessCPUTime: Duration {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        func duration(_ time: timeval) -> Duration { .seconds(Int64(time.tv_sec)) + .microseconds(Int64(time.tv_usec)) }
        return duration(usage.ru_utime) + duration(usage.ru_stime)
    }

    /// Resident memory now (`VmRSS`) and at its peak (`VmHWM`), in bytes.
    var memory: (resident: Int, peak: Int)? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        func kibibytes(_ field: String) -> Int? {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }) else {
                return nil
            }
            return line.split(separator: " ").compactMap { Int($0) }.first
        }
        guard let resident = kibibytes("VmRSS"), let peak = kibibytes("VmHWM") else { return nil }
        return (resident * 1024, peak * 1024)
    }

    /// The first line of its output that starts with `prefix` (the simulator's base URL, say).
    func line(startingWith prefix: String, within limit: Duration) async throws -> String? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline, isRunning {
            if let log = try? String(contentsOfFile: logPath, encoding: .utf8),
                let line = log.split(separator: "\n").first(where: { $0.hasPrefix(prefix) })
            {
                return String(line)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// The port of the worker's HTTP endpoints, from its "HTTP endpoints listening" log line.
    var httpPort: Int? {
        guard let log = try? String(contentsOfFile: logPath, encoding: .utf8),
            let range = log.range(of: #""http.port":""#)
        else { return nil }
        return Int(log[range.upperBound...].prefix { $0.isNumber })
    }

    func kill9() {
        // Once reaped, its pid may be another process's.
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
    }

    /// SIGTERM, then waits up to `seconds`; returns the exit status (or nil if it had to be killed).
    func terminate(within seconds: Double = 60) async -> Int32? {
        kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning {
            // Cancelled (Ctrl-C): no waiting for a drain, and no sleep that returns at once to spin on.
            if Date() > deadline || Task.isCancelled {
                kill9()
                return nil
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// CPU time as Linux's `/proc` tells it.
package enum ProcStat {
    /// User plus system CPU time of a process or a thread from its `stat` file (`/proc/PID/stat`,
    /// `/proc/self/task/TID/stat`: fields 14 and 15); `nil` when it cannot be read (gone, or no `/proc`).
    package static func cpuTime(statFile path: String) -> Duration? {
        guard let stat = try? String(contentsOfFile: path, encoding: .utf8), let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command name (which may hold spaces and parentheses): state is field 3, so utime (14) and
        // stime (15) are at 11 and 12 here.
        guard fields.count > 12, let user = Int64(fields[11]), let system = Int64(fields[12]), user >= 0, system >= 0
        else { return nil }
        // Values no kernel writes (a sum or product past Int64) read as unreadable, never as a trap.
        let (sum, overflow) = user.addingReportingOverflow(system)
        let (milli, overflowAgain) = sum.multipliedReportingOverflow(by: 1000)
        guard !overflow, !overflowAgain else { return nil }
        return .milliseconds(milli / max(Int64(sysconf(Int32(_SC_CLK_TCK))), 1))
    }
}

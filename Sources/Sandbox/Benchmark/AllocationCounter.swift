import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Counts a process's calls into the C allocator with `perf stat` on uprobes of libc's allocation entry points
/// (`malloc`, `calloc`, `realloc`, `posix_memalign`, `aligned_alloc`): every allocation the Swift runtime, NIO,
/// SQLite or librdkafka makes goes through one of them.
///
/// Each probed call traps into the kernel, so a counted run is several times slower than a measured one: its CPU
/// and latency figures are not comparable, only its counts. Needs `perf` and the right to add uprobes (root, or
/// `perf_event_paranoid` ≤ 1 with access to tracefs).
final class AllocationCounter: @unchecked Sendable {
    // @unchecked: `process` is only used through Foundation's thread-safe Process API after `run()`.
    static let functions = ["malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc"]

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let process: Process
    private let outputPath: String
    private let input = Pipe()
    private let errorPath: String

    /// Adds the probes (once per machine; an existing probe is kept) and starts counting `pid`'s calls.
    init(pid: Int32, folder: URL) throws {
        let libc = try Self.libcPath(of: pid)
        for function in Self.functions {
            // "already exists" is fine: probes outlive the run, and a second add of the same one fails.
            _ = try? Self.runPerf(["probe", "-q", "-x", libc, "--add", function])
        }
        outputPath = folder.appendingPathComponent("allocations.csv").path
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let events = Self.functions.map { "probe_libc:\($0)" }.joined(separator: ",")
        // Counted for as long as `cat` runs, which ends when its input closes: signals cannot end it, since a
        // process started from this one inherits the SIGINT this one ignores.
        process.arguments = ["perf", "stat", "-x", ",", "-o", outputPath, "-e", events, "-p", String(pid), "--", "cat"]
        process.standardInput = input
        errorPath = folder.appendingPathComponent("allocations.err").path
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
        try process.run()
    }

    /// Stops counting; returns the calls counted, by function.
    func stop() async throws -> [String: Int] {
        try? input.fileHandleForWriting.close()
        let deadline = ContinuousClock.now + .seconds(10)
        while process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        var counts: [String: Int] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count > 2, let count = Int(fields[0]), let name = fields[2].split(separator: ":").last else {
                continue
            }
            counts[String(name)] = count
        }
        guard !counts.isEmpty else {
            let errors = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
            throw Failure(
                description:
                    "perf stat counted nothing (is perf installed, and may this user add uprobes?): \(errors.prefix(500))"
            )
        }
        return counts
    }

    /// The path of the C library `pid` has mapped.
    static func libcPath(of pid: Int32) throws -> String {
        // Read to its end: procfs files report a size of 0, which a whole-file read may trust.
        let data = FileHandle(forReadingAtPath: "/proc/\(pid)/maps").map { $0.readDataToEndOfFile() } ?? Data()
        let maps = String(decoding: data, as: UTF8.self)
        for line in maps.split(separator: "\n") {
            guard let path = line.split(separator: " ", omittingEmptySubsequences: true).last, path.hasPrefix("/"),
                path.split(separator: "/").last.map({ $0.hasPrefix("libc.so") || $0.hasPrefix("libc-") }) == true
            else { continue }
            return String(path)
        }
        throw Failure(description: "no libc mapped in process \(pid)")
    }

    @discardableResult
    private static func runPerf(_ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["perf"] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}

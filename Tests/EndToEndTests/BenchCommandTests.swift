import Foundation
import GamebaseHTTP
import Testing

/// The benchmark commands measure; these tests only check that they run and report what they promise.
@Suite("iap-worker bench as a process", .timeLimit(.minutes(5)))
struct BenchCommandTests {
    @Test func theGamebaseClientBenchmarkReportsEveryClientForEveryRound() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("iap-bench-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let bench = try ChildProcess(
            "bench", ["bench", "gamebase-client", "--requests", "400", "--concurrency", "4", "--runs", "2", "--json"], folder: folder)
        bench.process.waitUntilExit()
        #expect(bench.process.terminationStatus == 0, "\(bench.output)")
        let text = try String(contentsOfFile: bench.stdoutPath, encoding: .utf8)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let runs = try #require(object["runs"] as? [[String: Any]])
        #expect(
            runs.compactMap { $0["client"] as? String }
                == ["gamebase", "async-http-client", "bare", "gamebase", "async-http-client", "bare"])
        for run in runs {
            #expect((run["cpuMicrosecondsPerRequest"] as? Double ?? 0) > 0)
            #expect((run["requestsPerSecond"] as? Double ?? 0) > 0)
        }
        let medians = try #require(object["medianCPUMicrosecondsPerRequest"] as? [String: Double])
        #expect(Set(medians.keys) == ["gamebase", "async-http-client", "bare"])
        // The simulator it started (its payments file lies in an `iap-bench-client-` folder) ended with it.
        #expect(Self.processes(withArgumentContaining: "iap-bench-client-").isEmpty)
    }

    /// Pids of running processes with an argument containing `text`, from `/proc/PID/cmdline`.
    static func processes(withArgumentContaining text: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry in
            guard let pid = Int32(entry),
                let cmdline = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"),
                String(decoding: cmdline, as: UTF8.self).contains(text)
            else { return nil }
            return pid
        }
    }
}

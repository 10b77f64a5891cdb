import Foundation
import Logging
import Testing

@testable import Sandbox

/// The benches' helpers for what goes wrong: a log's tail for the error that names a stopped process, and a send
/// rate that could never release a message.
@Suite("The benches' failure helpers")
struct BenchHelpersTests {
    @Test func aLogsTailIsItsLastBytesHoweverLongTheLog() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bench-tail-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // 3 MB of one letter, then the line that says why it stopped.
        let process = try MeasuredProcess(
            executable: "/bin/sh",
            arguments: ["-c", "head -c 3000000 /dev/zero | tr '\\000' a; echo; echo 'why: END'"],
            logPath: folder.appendingPathComponent("long.log").path)
        while process.isRunning { try await Task.sleep(for: .milliseconds(20)) }
        let tail = process.logTail()
        #expect(tail.utf8.count == 2_000)
        #expect(tail.hasSuffix("\nwhy: END\n"))
        #expect(process.logTail(bytes: 9) == "why: END\n")
        // Shorter than asked: the whole log; none asked: nothing.
        #expect(process.logTail(bytes: 10_000_000).utf8.count == 3_000_010)
        #expect(process.logTail(bytes: 0).isEmpty)
    }

    @Test func aLogThatIsGoneHasNoTail() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bench-tail-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let process = try MeasuredProcess(
            executable: "/bin/true", arguments: [], logPath: folder.appendingPathComponent("gone.log").path)
        while process.isRunning { try await Task.sleep(for: .milliseconds(20)) }
        try FileManager.default.removeItem(at: folder)
        #expect(process.logTail().isEmpty)
    }

    @Test(arguments: [0, -1, Double.nan, Double.infinity])
    func aRateThatCouldNeverSendIsRefusedNotWaitedOn(rate: Double) async throws {
        // No broker listens: the refusal comes before any send.
        let load = try LoadGenerator(bootstrapServers: "127.0.0.1:1", topic: "t", logger: Logger(label: "test"))
        await #expect(throws: PipelineBenchmark.Failure.self) {
            _ = try await load.produce(count: 1, rate: rate) { _ in ("k", [0x7b, 0x7d], nil) }
        }
        await load.close()
    }
}

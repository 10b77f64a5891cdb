import Foundation
import Testing
import Worker

#if canImport(Glibc)
    import Glibc
#endif

/// Log lines leave the hot path's syscalls: many go out in one write, within the flush interval, and none is lost,
/// reordered or torn.
@Suite("Buffered log output", .timeLimit(.minutes(1)))
struct LogOutputTests {
    /// A pipe whose read end never blocks: what has been written so far.
    final class Sink: @unchecked Sendable {
        let read: Int32
        let write: Int32
        private var received: [UInt8] = []

        init() throws {
            var ends: [Int32] = [0, 0]
            guard pipe(&ends) == 0 else { throw POSIXError(.EIO) }
            (read, write) = (ends[0], ends[1])
            _ = fcntl(read, F_SETFL, fcntl(read, F_GETFL) | O_NONBLOCK)
            // Room for the concurrency test's lines without a writer blocking on a full pipe.
            _ = fcntl(write, 1031 /* F_SETPIPE_SZ */, 1 << 20)
        }

        var text: String {
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = Glibc.read(read, &chunk, chunk.count)
                if count <= 0 { break }
                received += chunk[0..<count]
            }
            return String(decoding: received, as: UTF8.self)
        }

        deinit {
            close(read)
            close(write)
        }
    }

    @Test func infoLinesWaitForTheFlushIntervalAndThenGoOutTogetherInOrder() async throws {
        let sink = try Sink()
        let output = LogOutput(descriptor: sink.write, flushInterval: .milliseconds(300))
        for i in 0..<100 { output.write("line \(i)\n", urgent: false) }
        #expect(sink.text.isEmpty, "nothing written at once")
        try await Task.sleep(for: .milliseconds(1_000))
        #expect(sink.text == (0..<100).map { "line \($0)\n" }.joined(), "all of them, in order, after the interval")
    }

    @Test func aWarningIsWrittenAtOnceWithEverythingBeforeIt() throws {
        let sink = try Sink()
        let output = LogOutput(descriptor: sink.write, flushInterval: .seconds(60))
        output.write("info 1\n", urgent: false)
        output.write("info 2\n", urgent: false)
        output.write("warning\n", urgent: true)
        #expect(sink.text == "info 1\ninfo 2\nwarning\n")
    }

    @Test func aFullBufferIsWrittenWithoutWaitingAndFlushWritesTheRest() throws {
        let sink = try Sink()
        let output = LogOutput(descriptor: sink.write, flushInterval: .seconds(60), flushBytes: 1_000)
        let line = String(repeating: "x", count: 99) + "\n"
        for _ in 0..<15 { output.write(line, urgent: false) }
        #expect(sink.text.count == 1_000, "the first 1,000 bytes went out when the buffer filled")
        output.flush()
        #expect(sink.text.count == 1_500, "flush writes what was still buffered")
    }

    /// An output that takes nothing for a while (a non-blocking pipe whose reader is slow) is waited for, not
    /// dropped: every line arrives once the reader catches up.
    @Test func aFullNonBlockingOutputIsWaitedForAndLosesNoLine() async throws {
        let sink = try Sink()
        _ = fcntl(sink.write, 1031 /* F_SETPIPE_SZ */, 4_096)
        _ = fcntl(sink.write, F_SETFL, fcntl(sink.write, F_GETFL) | O_NONBLOCK)
        let output = LogOutput(descriptor: sink.write, flushInterval: .seconds(60), flushBytes: 1_024)
        let lines = (0..<300).map { "line \($0) " + String(repeating: "z", count: 90) + "\n" }
        let expected = lines.joined()
        let reader = Task.detached {
            var text = ""
            let deadline = ContinuousClock.now + .seconds(20)
            while text.utf8.count < expected.utf8.count, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(10))
                text = sink.text
            }
            return text
        }
        for line in lines { output.write(line, urgent: false) }
        output.flush()
        #expect(await reader.value == expected, "30 KB through a 4 KB pipe, every line once and in order")
    }

    @Test func linesFromManyThreadsAreNeitherTornNorLostNorReorderedPerWriter() async throws {
        let sink = try Sink()
        let output = LogOutput(descriptor: sink.write, flushInterval: .milliseconds(5), flushBytes: 4_096)
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for i in 0..<500 {
                        output.write("w\(writer) \(i) \(String(repeating: "y", count: i % 40))\n", urgent: i % 97 == 0)
                    }
                }
            }
        }
        output.flush()
        let lines = sink.text.split(separator: "\n")
        #expect(lines.count == 4_000)
        for writer in 0..<8 {
            let mine = lines.filter { $0.hasPrefix("w\(writer) ") }.map { $0.split(separator: " ") }
            #expect(mine.map { Int($0[1])! } == Array(0..<500), "writer \(writer): every line once, in order")
            #expect(
                mine.allSatisfy {
                    $0.count == 3 && $0[2].count == Int($0[1])! % 40 || ($0.count == 2 && Int($0[1])! % 40 == 0)
                })
        }
    }
}

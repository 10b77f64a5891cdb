import App
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Log lines leave the hot path's syscalls: many go out in one write, within the flush interval, and none is lost,
/// reordered or torn.
@Suite("Buffered log output", .timeLimit(.minutes(1)))
struct LogOutputTests {
    /// `F_SETPIPE_SZ` (Linux), which Glibc's module does not export.
    static let setPipeSize: Int32 = 1031

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
            _ = fcntl(write, LogOutputTests.setPipeSize, 1 << 20)
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

        // The descriptors are never closed: a LogOutput's background writer may still write after its test has
        // ended (a retry after a stall), and a closed pipe would end the test process with SIGPIPE, or its number,
        // reused by another test's pipe, would take stray lines.
    }

    @Test func infoLinesWaitForTheFlushIntervalAndThenGoOutTogetherInOrder() async throws {
        let sink = try Sink()
        let output = LogOutput(descriptor: sink.write, flushInterval: .milliseconds(300))
        for i in 0..<100 { output.write("line \(i)\n", urgent: false) }
        #expect(sink.text.isEmpty, "nothing written at once")
        try await Task.sleep(for: .milliseconds(1_000))
        #expect(sink.text == (0..<100).map { "line \($0)\n" }.joined(), "all of them, in order, after the interval")
    }

    /// At once: by the thread that logs it on a non-blocking output, by the background writer on a blocking one
    /// (where a thread that logs must never be the one to wait) — in both, long before the 60 s interval.
    @Test(arguments: [true, false])
    func aWarningIsWrittenAtOnceWithEverythingBeforeIt(nonBlocking: Bool) async throws {
        let sink = try Sink()
        if nonBlocking { _ = fcntl(sink.write, F_SETFL, fcntl(sink.write, F_GETFL) | O_NONBLOCK) }
        let output = LogOutput(descriptor: sink.write, flushInterval: .seconds(60))
        output.write("info 1\n", urgent: false)
        output.write("info 2\n", urgent: false)
        let started = ContinuousClock.now
        output.write("warning\n", urgent: true)
        if nonBlocking { #expect(sink.text == "info 1\ninfo 2\nwarning\n", "written by the thread that logged it") }
        #expect(await readUntil(sink) { $0.hasSuffix("warning\n") } == "info 1\ninfo 2\nwarning\n")
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    @Test(arguments: [true, false])
    func aFullBufferIsWrittenWithoutWaitingAndFlushWritesTheRest(nonBlocking: Bool) async throws {
        let sink = try Sink()
        if nonBlocking { _ = fcntl(sink.write, F_SETFL, fcntl(sink.write, F_GETFL) | O_NONBLOCK) }
        let output = LogOutput(descriptor: sink.write, flushInterval: .seconds(60), flushBytes: 1_000)
        let line = String(repeating: "x", count: 99) + "\n"
        for _ in 0..<15 { output.write(line, urgent: false) }
        if nonBlocking { #expect(sink.text.count == 1_000, "the first 1,000 bytes went out when the buffer filled") }
        // On a blocking output the background writer takes what is buffered when it runs: 1,000 bytes or more.
        #expect(
            await readUntil(sink) { $0.count >= 1_000 }.count >= 1_000, "the first 1,000 bytes, without the interval")
        output.flush()
        #expect(sink.text.count == 1_500, "flush writes what was still buffered")
    }

    /// An output whose reader stalls (a log collector that stops reading), blocking or not: the threads that log
    /// (the engine, NIO's event loops, the Kafka poll thread) go on, the background writer waits, and every line
    /// arrives when the reader resumes. Logged from a thread of its own, so a regression fails rather than hangs.
    @Test(arguments: [false, true])
    func aStalledOutputHoldsUpNoThreadThatLogs(nonBlocking: Bool) async throws {
        let sink = try Sink()
        _ = fcntl(sink.write, LogOutputTests.setPipeSize, 4_096)
        if nonBlocking { _ = fcntl(sink.write, F_SETFL, fcntl(sink.write, F_GETFL) | O_NONBLOCK) }
        let output = LogOutput(descriptor: sink.write, flushInterval: .milliseconds(20), flushBytes: 1_024)
        let lines = (0..<100).map { "line \($0) " + String(repeating: "z", count: 90) + "\n" } + ["warning\n"]
        let finished = Mutex(false)
        let logging = Thread {
            for line in lines.dropLast() { output.write(line, urgent: false) }
            output.write(lines.last!, urgent: true)
            finished.withLock { $0 = true }
        }
        logging.start()
        try await Task.sleep(for: .milliseconds(1_500))
        #expect(finished.withLock { $0 }, "10 KB logged into a 4 KB pipe nobody reads held up the thread that logged")
        let expected = lines.joined()
        #expect(
            await readUntil(sink) { $0.utf8.count >= expected.utf8.count } == expected, "every line, whole, in order")
    }

    /// A line longer than the pipe holds is cut by the full output: its rest is written before the next line.
    @Test func aLineCutByAFullOutputIsFinishedBeforeTheNextOne() async throws {
        let sink = try fullableSink()
        let output = LogOutput(
            descriptor: sink.write, flushInterval: .seconds(60), flushBytes: 1_024, stallLimit: .milliseconds(100))
        let long = "long " + String(repeating: "q", count: 6_000) + "\n"
        output.write(long, urgent: true)
        output.write("next\n", urgent: true)
        #expect(await readUntil(sink) { $0.hasSuffix("next\n") } == long + "next\n")
    }

    /// While the output takes nothing, what is buffered and what the writer holds stay within the bound together.
    @Test func theBufferAndWhatTheWriterHoldsStayWithinTheBound() async throws {
        let sink = try fullableSink()
        let bound = 8_192
        let output = LogOutput(
            descriptor: sink.write, flushInterval: .milliseconds(10), flushBytes: 1_024, maxBufferedBytes: bound,
            stallLimit: .milliseconds(200))
        var most = 0
        for i in 0..<3_000 {
            output.write("line \(i) " + String(repeating: "z", count: 90) + "\n", urgent: i % 50 == 0)
            most = max(most, output.bufferedBytes)
            if i % 10 == 0 { try await Task.sleep(for: .milliseconds(5)) }
        }
        // The bound, and at most one line that reports the lines dropped (put back when it was cut).
        #expect(most <= bound + 300, "\(most) bytes held with a bound of \(bound)")
        // The reader resumes and takes everything, the report of the dropped lines last.
        _ = await readUntil(sink) { _ in output.bufferedBytes == 0 }
        #expect(output.bufferedBytes == 0)
        let text = sink.text  // what the writer wrote after the last read, too
        #expect(text.hasSuffix("\n") && text.contains("log.dropped_lines"))
    }

    /// An output that takes nothing for a while (a non-blocking pipe whose reader is slow) is waited for, not
    /// dropped: every line arrives once the reader catches up.
    @Test func aFullNonBlockingOutputIsWaitedForAndLosesNoLine() async throws {
        let sink = try Sink()
        _ = fcntl(sink.write, LogOutputTests.setPipeSize, 4_096)
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

    /// A pipe of 4 KB whose writer never blocks, with nobody reading yet.
    private func fullableSink() throws -> Sink {
        let sink = try Sink()
        _ = fcntl(sink.write, LogOutputTests.setPipeSize, 4_096)
        _ = fcntl(sink.write, F_SETFL, fcntl(sink.write, F_GETFL) | O_NONBLOCK)
        return sink
    }

    /// Reads the sink until `done` says so or 20 s pass.
    private func readUntil(_ sink: Sink, _ done: @escaping @Sendable (String) -> Bool) async -> String {
        var text = ""
        let deadline = ContinuousClock.now + .seconds(20)
        while !done(text), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
            text = sink.text
        }
        return text
    }

    /// A reader that stalls longer than the writer waits: what could not be written stays buffered, the line cut
    /// by the full pipe is finished first, and everything arrives once the reader resumes.
    @Test func aReaderStalledPastTheWaitGetsEveryLineWholeWhenItResumes() async throws {
        let sink = try fullableSink()
        let output = LogOutput(
            descriptor: sink.write, flushInterval: .seconds(60), flushBytes: 1_024, stallLimit: .milliseconds(300))
        let lines = (0..<300).map { "line \($0) " + String(repeating: "z", count: 90) + "\n" }
        for line in lines { output.write(line, urgent: false) }
        output.flush()  // gives up after 300 ms with most of it unwritten
        try await Task.sleep(for: .milliseconds(500))
        let expected = lines.joined()
        #expect(await readUntil(sink) { $0.utf8.count >= expected.utf8.count } == expected)
    }

    /// While the buffer is at its bound, new lines are dropped, and a line of its own says how many: every line
    /// is either written whole, in order, or counted.
    @Test func linesRefusedByAFullBufferAreCountedInALineOfTheirOwn() async throws {
        let sink = try fullableSink()
        let output = LogOutput(
            descriptor: sink.write, flushInterval: .seconds(60), flushBytes: 1_024, maxBufferedBytes: 4_096,
            stallLimit: .milliseconds(100))
        let lines = (0..<200).map { "line \($0) " + String(repeating: "z", count: 90) }
        for line in lines { output.write(line + "\n", urgent: false) }
        output.flush()
        let received = await readUntil(sink) { text in
            let counted = text.split(separator: "\n").reduce(0) { sum, line in
                sum + (line.hasPrefix("line ") ? 1 : Self.droppedCount(line) ?? 0)
            }
            return counted >= 200 && text.hasSuffix("\n")
        }.split(separator: "\n")
        let written = received.filter { $0.hasPrefix("line ") }
        let notices = received.filter { !$0.hasPrefix("line ") }
        #expect(written.count > 40 && written.count < 200, "\(written.count) written")
        let indexes = written.compactMap { Int($0.split(separator: " ")[1]) }
        #expect(written.allSatisfy { lines[Int($0.split(separator: " ")[1])!] == $0 }, "every written line whole")
        #expect(indexes == indexes.sorted() && Set(indexes).count == indexes.count, "in order, each once")
        #expect(!notices.isEmpty && notices.allSatisfy { $0.contains(#""level":"warning""#) })
        #expect(written.count + notices.compactMap { Self.droppedCount($0) }.reduce(0, +) == 200, "\(notices)")
    }

    private static func droppedCount(_ line: Substring) -> Int? {
        guard let range = line.range(of: #""log.dropped_lines":""#) else { return nil }
        return Int(line[range.upperBound...].prefix { $0.isNumber })
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

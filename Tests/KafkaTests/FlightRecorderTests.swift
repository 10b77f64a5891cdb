import Logging
import Testing

/// The Kafka tests' flight recorder: what a timed-out wait prints must start with the first lines, end with the
/// last, say how many were left out between, and stay readable whatever a line carries.
struct FlightRecorderTests {
    private func logger(_ recorder: FlightRecorder) -> Logger {
        var logger = Logger(label: "recorder.test") { _ in recorder.handler() }
        logger.logLevel = .trace
        return logger
    }

    private func messages(_ recorder: FlightRecorder) -> [String] {
        recorder.lines.map { line in
            // "<time> <level> <message>[ <metadata>]": the message alone, or the line when it is the gap's.
            line.hasPrefix("…") ? line : String(line.split(separator: " ", maxSplits: 2)[2])
        }
    }

    @Test func keepsTheFirstLinesAndTheLastWithTheGapCounted() {
        let recorder = FlightRecorder(head: 2, tail: 3)
        let logger = logger(recorder)
        for i in 0..<10 { logger.info("line-\(i)") }
        #expect(messages(recorder) == ["line-0", "line-1", "… 5 lines dropped …", "line-7", "line-8", "line-9"])
    }

    @Test func beforeTheTailFillsNothingIsDroppedOrReordered() {
        let recorder = FlightRecorder(head: 2, tail: 3)
        let logger = logger(recorder)
        for i in 0..<4 { logger.info("line-\(i)") }
        #expect(messages(recorder) == ["line-0", "line-1", "line-2", "line-3"])
    }

    @Test func librdkafkasAssignmentListingsAreLeftOut() {
        let recorder = FlightRecorder(head: 10, tail: 10)
        let logger = logger(recorder)
        logger.debug("List with 1 partition(s):", metadata: ["kafka.facility": "DUMP_ALL"])
        logger.debug("Heartbeat", metadata: ["kafka.facility": "HEARTBEAT"])
        #expect(recorder.lines.count == 1)
        #expect(recorder.lines.first?.contains("Heartbeat") == true)
    }

    @Test func aLineOfAMegabyteIsCutAndSaysHowLongItWas() throws {
        let recorder = FlightRecorder(head: 1, tail: 1)
        logger(recorder).info("\(String(repeating: "x", count: 1 << 20))")
        let lines = recorder.lines
        try #require(lines.count == 1)
        #expect(lines[0].count < FlightRecorder.maxLineCharacters + 40)
        #expect(lines[0].hasSuffix("characters)"))
    }
}

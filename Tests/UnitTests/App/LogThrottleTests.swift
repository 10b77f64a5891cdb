import IAPTestSupport
import Logging
import Synchronization
import Testing

@testable import App

@Suite("Repeated warnings and errors are written once per interval, with their count")
struct LogThrottleTests {
    let recorder = RecordingLogHandler.Recorder()
    let clock = Shared<ContinuousClock.Instant>(.now)

    func throttle() -> LogThrottle {
        LogThrottle(
            interval: .seconds(10), maxKinds: 8, now: { [clock] in clock.withLock { $0 } }, schedulesSummaries: false)
    }

    func logger(_ throttle: LogThrottle, label: String = "iap-worker") -> Logger {
        Logger(label: label) { [recorder] label in
            ThrottledLogHandler(recorder.handler(), label: label, throttle: throttle)
        }
    }

    func advance(_ duration: Duration) { clock.withLock { $0 += duration } }

    /// A ledger that cannot write fails every purchase's attempt: 25,149 error lines in two minutes before. Now the
    /// first, then one line per interval saying how many it stands for.
    @Test func aFloodOfOneKindIsOneLineThenOneSummaryPerInterval() {
        let throttle = throttle()
        let log = logger(throttle)
        for attempt in 0..<1_000 {
            log.error("purchase could not be finished; retrying", metadata: ["iap.attempt": "\(attempt)"])
        }
        #expect(recorder.all.count == 1)
        #expect(recorder.all.first?.metadata["iap.attempt"] == "0")
        throttle.flushDue()
        #expect(recorder.all.count == 1, "the window has not ended")
        advance(.seconds(10))
        throttle.flushDue()
        #expect(recorder.all.count == 2)
        let summary = recorder.all[1]
        #expect(summary.message == "purchase could not be finished; retrying")
        #expect(summary.metadata["log.repeated"] == "999")
        #expect(summary.metadata["log.repeated_within_s"] == "10")
        #expect(summary.metadata["iap.attempt"] == "999", "the last line counted, with its own metadata")
        // The fault lasts: still one line per interval.
        for _ in 0..<500 { log.error("purchase could not be finished; retrying") }
        #expect(recorder.all.count == 2)
        advance(.seconds(10))
        throttle.flushDue()
        #expect(recorder.all.count == 3)
        #expect(recorder.all[2].metadata["log.repeated"] == "500")
        // It ends: the next window is empty and forgotten; a later line is written at once.
        advance(.seconds(10))
        throttle.flushDue()
        advance(.seconds(1))
        log.error("purchase could not be finished; retrying")
        #expect(recorder.all.count == 4)
        #expect(recorder.all[3].metadata["log.repeated"] == nil)
    }

    /// A line that comes after its window ended, before the scheduled summary ran: the count is said first, never
    /// overwritten by the new window.
    @Test func aLineAfterTheWindowEndsSaysTheCountFirst() {
        let throttle = throttle()
        let log = logger(throttle)
        for _ in 0..<5 { log.error("a poll failed") }
        advance(.seconds(11))
        log.error("a poll failed")
        #expect(recorder.all.map { $0.metadata["log.repeated"] } == [nil, "4", nil])
    }

    /// At a clean stop every count still open is said.
    @Test func aStopSaysEveryCountStillOpen() {
        let throttle = throttle()
        let log = logger(throttle)
        for _ in 0..<3 { log.error("a poll failed") }
        throttle.flushAll()
        #expect(recorder.all.map { $0.metadata["log.repeated"] } == [nil, "2"])
    }

    @Test func kindsAreCountedApartByLoggerAndMessage() {
        let throttle = throttle()
        let worker = logger(throttle, label: "iap-worker")
        let kafka = logger(throttle, label: "iap-worker.librdkafka")
        for _ in 0..<10 {
            worker.error("the sweeper failed")
            worker.warning("a poll of the App Store failed")
            kafka.error("the sweeper failed")
        }
        #expect(recorder.all.count == 3)
    }

    /// One line per outcome is the log's record of every message (what support searches): never counted away; nor
    /// are lines below `warning`.
    @Test func outcomeLinesAndInfoLinesPassUntouched() {
        let throttle = throttle()
        let log = logger(throttle)
        for seq in 0..<50 {
            log.warning(
                "purchase dead_lettered", metadata: ["iap.outcome": "dead_lettered", "iap.payment_seq": "p\(seq)"])
            log.info("purchase granted", metadata: ["iap.payment_seq": "p\(seq)"])
            log.notice("the ledger writes again")
        }
        #expect(recorder.all.count == 150)
    }

    /// Messages that carry a value (an offset, an id) make a kind each: the table stays bounded, and lines beyond it
    /// pass rather than vanish.
    @Test func theTableOfKindsStaysBoundedAndFailsOpen() {
        let throttle = throttle()
        let log = logger(throttle)
        for id in 0..<20 {
            log.warning("odd record at offset \(id)")
            log.warning("odd record at offset \(id)")
        }
        #expect(recorder.all.count >= 20, "every kind said at least once")
        #expect(recorder.all.count <= 20 + 12, "the first 8 kinds' repeats are counted")
    }
}

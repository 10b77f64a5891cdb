import Testing

@testable import Engine

@Suite struct OffsetTrackerTests {
    @Test func theWatermarkNeverJumpsPastAnOffsetStillInFlight() {
        var tracker = OffsetTracker()
        for offset in [10, 11, 12, 15, 16] as [Int64] { tracker.started(offset) }
        let r1 = tracker.finished(11)
        #expect(r1 == nil)
        let r2 = tracker.finished(15)
        #expect(r2 == nil)
        #expect(tracker.watermark == nil)
        let r3 = tracker.finished(10)
        #expect(r3 == 12, "10 and 11 done: next to commit is 12")
        let r4 = tracker.finished(12)
        #expect(r4 == 16, "gaps in offsets (compaction, markers) are fine")
        #expect(tracker.outstanding == 1)
        let r5 = tracker.finished(16)
        #expect(r5 == 17)
        #expect(tracker.outstanding == 0)
    }

    @Test func inOrderFinishingMovesTheWatermarkEachTime() {
        var tracker = OffsetTracker()
        for offset in 0..<5 as Range<Int64> { tracker.started(offset) }
        for offset in 0..<5 as Range<Int64> { #expect(tracker.finished(offset) == offset + 1) }
    }
}

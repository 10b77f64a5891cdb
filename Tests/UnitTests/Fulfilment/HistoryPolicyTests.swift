import Foundation
import Fulfilment
import IAPTestSupport
import Testing

/// The window rules of a store history's poller on their own, on the test clock: due or not, the window a pass reads,
/// a refused start or page token, what a page changes, the lease.
@Suite("History window policy")
struct HistoryPolicyTests {
    static let day: TimeInterval = 86_400
    let clock = TestClock()
    let policy = HistoryPolicy(
        interval: .seconds(300), lease: .seconds(120), historyKept: .seconds(30 * 86_400),
        overlap: .seconds(6 * 3_600), maxPages: 100)

    @Test func aFirstWindowReachesBackTheHistoryKeptLessADayToNow() {
        let mark = HistoryPollMark(name: "google:voided")
        #expect(policy.isDue(mark, now: clock.now))
        let window = policy.window(from: mark, now: clock.now)
        #expect(window.windowStart == clock.now.addingTimeInterval(-29 * Self.day))
        #expect(window.windowEnd == clock.now)
        #expect(window.paginationToken == nil && window.readThrough == nil)
    }

    @Test func aWindowReadToItsEndIsDueAnIntervalAfterItAndTheNextOverlapsIt() {
        var mark = policy.window(from: HistoryPollMark(name: "apple:REFUND"), now: clock.now)
        mark = policy.afterPage(mark, latest: nil, nextPageToken: nil, now: clock.now)
        #expect(mark.lastSuccess == clock.now)
        clock.advance(by: .seconds(299))
        #expect(!policy.isDue(mark, now: clock.now))
        clock.advance(by: .seconds(1))
        #expect(policy.isDue(mark, now: clock.now))
        let next = policy.window(from: mark, now: clock.now)
        #expect(next.windowStart == mark.windowEnd!.addingTimeInterval(-6 * 3_600))
        #expect(next.windowEnd == clock.now)
    }

    @Test func aWindowCutShortResumesFromItsPageWhileItsStartIsAcceptedThenFromItsStart() {
        let start = clock.now.addingTimeInterval(-10 * Self.day)
        let cut = HistoryPollMark(
            name: "apple:REFUND", windowStart: start, windowEnd: clock.now.addingTimeInterval(-3_600),
            paginationToken: "page-7")
        #expect(policy.isDue(cut, now: clock.now), "a window mid-page is always due")
        #expect(policy.window(from: cut, now: clock.now) == cut, "resumed as it stood")
        // Its start now older than the store accepts: read again from as far back as it reaches, never skipped.
        clock.advance(by: .seconds(21 * 86_400))
        let again = policy.window(from: cut, now: clock.now)
        #expect(again.paginationToken == nil)
        #expect(again.windowStart == policy.earliest(now: clock.now))
        #expect(again.windowEnd == clock.now)
    }

    @Test func aRefusedStartHalvesTheWindowDownToADayThenIsAFailure() {
        var mark = policy.window(from: HistoryPollMark(name: "apple:REFUND"), now: clock.now)
        var reaches: [TimeInterval] = []
        while let narrowed = policy.narrowed(mark, now: clock.now) {
            mark = narrowed
            reaches.append(mark.windowEnd!.timeIntervalSince(mark.windowStart!) / Self.day)
        }
        #expect(reaches == [14.5, 7.25, 3.625, 1.8125, 1])
        #expect(mark.paginationToken == nil)
    }

    @Test func aRefusedTokenReadsOnFromThePagesReadASecondBefore() {
        let start = clock.now.addingTimeInterval(-20 * Self.day)
        let through = clock.now.addingTimeInterval(-5 * Self.day)
        let mark = HistoryPollMark(
            name: "apple:REFUND", windowStart: start, windowEnd: clock.now, paginationToken: "t", readThrough: through)
        let resumed = policy.resumedAfterRefusedToken(mark, now: clock.now)
        #expect(resumed.windowStart == through.addingTimeInterval(-1))
        #expect(resumed.paginationToken == nil)
        // Nothing read yet: from the window's start.
        var unread = mark
        unread.readThrough = nil
        #expect(policy.resumedAfterRefusedToken(unread, now: clock.now).windowStart == start)
    }

    @Test func aPageMovesHowFarTheWindowIsReadButNeverPastItsEnd() {
        let end = clock.now
        var mark = HistoryPollMark(
            name: "google:voided", windowStart: end.addingTimeInterval(-Self.day), windowEnd: end)
        mark = policy.afterPage(mark, latest: end.addingTimeInterval(-600), nextPageToken: "2", now: clock.now)
        #expect(mark.readThrough == end.addingTimeInterval(-600) && mark.paginationToken == "2")
        mark = policy.afterPage(mark, latest: end.addingTimeInterval(-900), nextPageToken: "3", now: clock.now)
        #expect(mark.readThrough == end.addingTimeInterval(-600), "an earlier time keeps the furthest")
        mark = policy.afterPage(mark, latest: end.addingTimeInterval(60), nextPageToken: "4", now: clock.now)
        #expect(mark.readThrough == end.addingTimeInterval(-600), "a time past the window's end is not believed")
        #expect(mark.lastSuccess == nil)
        clock.advance(by: .seconds(5))
        mark = policy.afterPage(mark, latest: nil, nextPageToken: nil, now: clock.now)
        #expect(mark.paginationToken == nil && mark.readThrough == nil && mark.lastSuccess == clock.now)
    }

    @Test func aLeaseIsRenewedWhileReadingOnAndGivenUpAtTheEnd() {
        #expect(policy.leaseEnd(readingOn: true, now: clock.now) == clock.now.addingTimeInterval(120))
        #expect(policy.leaseEnd(readingOn: false, now: clock.now) == nil)
        #expect(
            HistoryPolicy(
                interval: .seconds(1), lease: .seconds(1), historyKept: .seconds(1), overlap: .zero, maxPages: 0
            ).maxPages == 1)
    }
}

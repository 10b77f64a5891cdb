import Foundation
import Wire

/// The rules a poller of a store's history reads its windows by, apart from any store and any clock: when a position
/// is due, which window a pass reads, how a refused start or page token goes on, and how long a lease is held. Every
/// method is a pure function of the position and `now`.
///
/// A window starts an overlap before the previous one ended (a notification is recorded once by its id, so reading one
/// again changes nothing) and never before what the history keeps; the first one reaches back as far as it does, less a
/// day (a window cut short then has a day to be read on from its page).
public struct HistoryPolicy: Sendable, Hashable {
    /// Between passes: a window read to its end is read again once this has passed since it began.
    public var interval: Duration
    /// How long a pass holds a stream's position past its last page before another instance may take it (renewed with
    /// each page saved, given up when the window is read to its end): what a pass cut short by a crash costs.
    public var lease: Duration
    /// How far back the store's history reaches.
    public var historyKept: Duration
    /// How far each window reaches back over the previous one: a notification that appears in the history late, or
    /// instances whose clocks disagree, are still read.
    public var overlap: Duration
    /// Pages read per stream and pass at most; the rest waits for the next pass.
    public var maxPages: Int

    /// The shortest window a refused start date narrows to.
    public static let narrowestReach: TimeInterval = 86_400

    public init(interval: Duration, lease: Duration, historyKept: Duration, overlap: Duration, maxPages: Int) {
        self.interval = interval
        self.lease = lease
        self.historyKept = historyKept
        self.overlap = overlap
        self.maxPages = max(1, maxPages)
    }

    /// The earliest start a new window takes: the history kept, less a day.
    public func earliest(now: Date) -> Date {
        now.addingTimeInterval(-historyKept.seconds + Self.narrowestReach)
    }

    /// Whether a pass reads the position now: not while its window was read to its end less than an interval ago (by
    /// any instance), so several instances never read a stream more often than one would.
    public func isDue(_ mark: HistoryPollMark, now: Date) -> Bool {
        guard mark.paginationToken == nil, let end = mark.windowEnd else { return true }
        return now >= end.addingTimeInterval(interval.seconds)
    }

    /// The window a pass reads: one cut short, resumed from its page while the store still accepts its start (the
    /// history kept, less an hour for clocks that disagree); otherwise a new one to `now`, from an overlap before the
    /// last one ended — or, for one cut short whose start the store no longer accepts, from that start as far as the
    /// history still reaches (its unread pages are read again, never skipped).
    public func window(from mark: HistoryPollMark, now: Date) -> HistoryPollMark {
        let accepted = now.addingTimeInterval(-historyKept.seconds + 3_600)
        if let start = mark.windowStart, mark.paginationToken != nil, mark.windowEnd != nil, start >= accepted {
            return mark
        }
        var next = mark
        let from: Date
        if mark.paginationToken != nil, let start = mark.windowStart {
            from = start
        } else {
            from = mark.windowEnd.map { $0.addingTimeInterval(-overlap.seconds) } ?? earliest(now: now)
        }
        next.windowStart = max(earliest(now: now), min(from, now))
        next.windowEnd = now
        next.paginationToken = nil
        next.readThrough = nil
        return next
    }

    /// After the store refused the window's start as older than the history it keeps (less than configured: Apple's
    /// sandbox, say): the window starting half as far back, from its first page; `nil` once it reaches back a day or
    /// less, when the refusal is a failure of its own. Never a failure for ever.
    public func narrowed(_ mark: HistoryPollMark, now: Date) -> HistoryPollMark? {
        let end = mark.windowEnd ?? now
        let reach = end.timeIntervalSince(mark.windowStart ?? earliest(now: now))
        guard reach > Self.narrowestReach else { return nil }
        var next = mark
        next.windowStart = end.addingTimeInterval(-max(Self.narrowestReach, reach / 2))
        next.paginationToken = nil
        return next
    }

    /// After the store refused a page token (expired, unknown): the window goes on from where its pages read so far
    /// reach, a second before (what is read again is recorded once by its id) — never from its first page again, which
    /// a window longer than a pass whose token expires between passes would do for ever.
    public func resumedAfterRefusedToken(_ mark: HistoryPollMark, now: Date) -> HistoryPollMark {
        var next = mark
        if let through = mark.readThrough, let start = mark.windowStart, through > start {
            next.windowStart = min(through.addingTimeInterval(-1), mark.windowEnd ?? now)
        }
        next.paginationToken = nil
        return next
    }

    /// After a page was read: how far the pages reach (`latest`, the latest store time believed on it, within the
    /// window), and the next page's token — or, on the last page, the window read to its end at `now`.
    public func afterPage(_ mark: HistoryPollMark, latest: Date?, nextPageToken: String?, now: Date) -> HistoryPollMark
    {
        var next = mark
        if let latest, latest <= (mark.windowEnd ?? now) {
            next.readThrough = max(mark.readThrough ?? latest, latest)
        }
        if let nextPageToken {
            next.paginationToken = nextPageToken
        } else {
            next.paginationToken = nil
            next.readThrough = nil
            next.lastSuccess = now
        }
        return next
    }

    /// The lease a saved position holds: renewed while its window reads on, given up (`nil`) when read to its end —
    /// any instance may take the next pass at once, a restarted one too.
    public func leaseEnd(readingOn: Bool, now: Date) -> Date? {
        readingOn ? now.addingTimeInterval(lease.seconds) : nil
    }
}

import Foundation

/// Where a poller of a store's notification history stands, kept in the ledger so restarts and other instances
/// resume from it: the window being read (and, mid-window, the page to continue from) and when a window was last read
/// to its end. On PostgreSQL one instance at a time holds it (a lease).
public struct HistoryPollMark: Sendable, Hashable {
    /// `apple:<notificationType>`.
    public var name: String
    public var windowStart: Date?
    public var windowEnd: Date?
    /// Mid-window: the page to read next. `nil` once the window was read to its end.
    public var paginationToken: String?
    /// When a window was last read to its end.
    public var lastSuccess: Date?
    /// Mid-window: how far the pages read so far reach (the latest time a notification on them was signed), where a
    /// reading whose pagination token the store no longer takes resumes instead of the window's first page.
    public var readThrough: Date?

    public init(
        name: String, windowStart: Date? = nil, windowEnd: Date? = nil, paginationToken: String? = nil,
        lastSuccess: Date? = nil, readThrough: Date? = nil
    ) {
        self.name = name
        self.windowStart = windowStart
        self.windowEnd = windowEnd
        self.paginationToken = paginationToken
        self.lastSuccess = lastSuccess
        self.readThrough = readThrough
    }
}

import Foundation

/// A store's history of refunds, read in windows of time and page by page — Apple's notification history, Google
/// Play's Voided Purchases API. ``HistoryPolicy`` and the engine's history poller read any of them through this port;
/// each store's adapter knows its API's requests, answers and errors, and reads the items it returns (verified,
/// matched to a store payment) into notifications or refusals.
public protocol StoreHistorySource: Sendable {
    /// The store read.
    var store: Store { get }
    /// The streams read apart, each with its own position in the ledger (``HistoryPollMark/name`` is
    /// `<store>:<stream>`): Apple's notification types, Google's one list of voided purchases.
    var streams: [String] { get }
    /// How far back the store's history reaches: a window never starts earlier (less a margin for clocks).
    var historyKept: Duration { get }
    /// One page of `request`'s window, its items read as of `receivedAt`.
    func page(_ request: HistoryPageRequest, receivedAt: Date) async throws(StoreHistoryError) -> HistoryPage
}

/// One page of a stream's window to read: from `start` to `end`, from the page `pageToken` names (`nil`: the first).
public struct HistoryPageRequest: Sendable, Hashable {
    public var stream: String
    public var start: Date
    public var end: Date
    public var pageToken: String?

    public init(stream: String, start: Date, end: Date, pageToken: String? = nil) {
        self.stream = stream
        self.start = start
        self.end = end
        self.pageToken = pageToken
    }
}

/// A page of a store's history: its items read, and the token of the next page while there is one.
public struct HistoryPage: Sendable {
    /// One entry of the page: what reading it gave, the bytes it came as (kept when refused), and the store's time
    /// of it when it was believed (how far the pages read reach: a refused token resumes from there).
    public struct Item: Sendable {
        public var read: Result<ReadNotification, NotificationRefusal>
        public var body: [UInt8]
        public var time: Date?

        public init(read: Result<ReadNotification, NotificationRefusal>, body: [UInt8], time: Date?) {
            self.read = read
            self.body = body
            self.time = time
        }
    }

    public var items: [Item]
    /// `nil` on the window's last page.
    public var nextPageToken: String?

    public init(items: [Item], nextPageToken: String?) {
        self.items = items
        self.nextPageToken = nextPageToken
    }
}

/// Why a store's history did not answer a page, as the poller acts on it; ``result`` is the metric's label
/// (`iap_store_polls_total{store,result}`) and the kind of error the log says at most once a minute.
public struct StoreHistoryError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The window starts before the history the store keeps: a shorter window is read.
        case startTooFarInPast
        /// The page token is expired or unknown: the window reads on from how far its pages reached.
        case pageTokenRefused
        /// The store's quota is spent (HTTP 429): nothing more this pass; the next is not earlier than `retryAfter`.
        case quota(retryAfter: Duration?)
        /// Anything else: read again next pass.
        case failed
    }

    public var kind: Kind
    public var result: String
    public var description: String

    public init(_ kind: Kind, result: String, _ description: String) {
        self.kind = kind
        self.result = result
        self.description = description
    }
}

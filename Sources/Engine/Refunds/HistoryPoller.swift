import Foundation
import Fulfilment
import Logging
import ServiceLifecycle
import Synchronization
import Wire

/// Reads a store's history of refunds (``StoreHistorySource``: Apple's notification history, Google Play's voided
/// purchases) on an interval and takes in each item as the intake does: believed ones recorded and carried out,
/// refused ones kept and counted. Where each stream's reading stands is kept in the ledger (``HistoryPollMark``): a
/// restart or another instance resumes from it, mid-window from its page; on PostgreSQL one instance at a time holds
/// it (a lease). Which window a pass reads, and how a refused start or token goes on, is ``HistoryPolicy``'s.
///
/// A failure of one kind (an error code, the ledger) is logged at most once a minute for the store, with how many
/// passes it stood for; every one is counted in `iap_store_polls_total{store,result}`.
public final class HistoryPoller: Service {
    public struct Configuration: Sendable, Hashable {
        /// Between passes (`refunds.<store>.interval_ms`).
        public var interval: Duration
        /// See ``HistoryPolicy/lease``.
        public var lease: Duration
        /// See ``HistoryPolicy/overlap``.
        public var overlap: Duration
        /// Pages read per stream and pass at most; the rest waits for the next pass.
        public var maxPages: Int
        /// How often a failure of one kind is logged at most.
        public var errorLogInterval: Duration

        public init(
            interval: Duration = .seconds(300), lease: Duration = .seconds(120),
            overlap: Duration = .seconds(6 * 3_600),
            maxPages: Int = 100, errorLogInterval: Duration = .seconds(60)
        ) {
            self.interval = interval
            self.lease = lease
            self.overlap = overlap
            self.maxPages = maxPages
            self.errorLogInterval = errorLogInterval
        }
    }

    /// What one pass did.
    public struct Pass: Sendable, Hashable {
        public var pages = 0
        public var notifications = 0
        public var refused = 0
        /// Streams another instance was reading.
        public var heldElsewhere = 0
        /// Streams whose last window was read to its end less than an interval ago (by any instance).
        public var notDue = 0
        /// Streams whose reading failed (the store's API or the ledger); they are read again next pass.
        public var failed = 0
        /// Streams whose window was not read to its end within the pass's pages (read on next pass).
        public var incomplete = 0
        /// Whether the store's quota was spent: the pass stopped there, and the next waits as long as it asked.
        public var quotaSpent = false
    }

    let source: any StoreHistorySource
    let recorder: RefundRecorder
    let positions: any HistoryPositionLedger
    public let configuration: Configuration
    let policy: HistoryPolicy
    /// This instance's name in the leases.
    let owner: String
    let metrics: any EngineMetrics
    let clock: any WorkerClock
    let logger: Logger
    /// When each kind of failure was last logged, and how many passes met it since.
    private let errorLog = Mutex<[String: (at: Date, repeated: Int)]>([:])
    /// After a spent quota: no call to the store before this.
    private let quietUntil = Mutex<Date?>(nil)

    public init(
        source: any StoreHistorySource, recorder: RefundRecorder, positions: any HistoryPositionLedger,
        configuration: Configuration, owner: String,
        metrics: any EngineMetrics, clock: any WorkerClock = .system, logger: Logger
    ) {
        self.source = source
        self.recorder = recorder
        self.positions = positions
        self.configuration = configuration
        self.policy = HistoryPolicy(
            interval: configuration.interval, lease: configuration.lease, historyKept: source.historyKept,
            overlap: configuration.overlap, maxPages: configuration.maxPages)
        self.owner = owner
        self.metrics = metrics
        self.clock = clock
        self.logger = logger
    }

    /// The store read.
    public var store: Store { source.store }
    /// The store as metrics and logs name it.
    var label: String { source.store.rawValue }
    var names: Set<String> { Set(source.streams.map(positionName)) }
    func positionName(_ stream: String) -> String { "\(label):\(stream)" }

    public func run() async throws {
        await runPeriodically(every: configuration.interval, on: clock) { _ = await self.pollOnce() }
        // Stopped (a rolling restart): a window left mid-page is free for the next reader at once, not after its lease.
        await releaseLeases()
    }

    /// Gives up the leases this instance holds (positions unchanged); best effort, at shutdown.
    func releaseLeases() async {
        let (refunds, owner, names) = (positions, owner, names)
        do {
            try await recorder.deadline.run("release the history positions") {
                for mark in try await refunds.historyPolls() where names.contains(mark.name) {
                    _ = try await refunds.saveHistoryPoll(mark, owner: owner, leaseUntil: nil)
                }
            }
        } catch {
            logger.warning(
                "the history positions' leases could not be given up; they run out by themselves",
                metadata: ["iap.store": "\(label)", "iap.error": "\(error)"])
        }
    }

    /// One pass over every stream; never throws (a failure is logged, counted, and read again next pass).
    public func pollOnce() async -> Pass {
        var pass = Pass()
        if let quiet = quietUntil.withLock({ $0 }), clock.now < quiet { return pass }
        for stream in source.streams where !pass.quotaSpent {
            do {
                try await poll(stream, into: &pass)
            } catch is CancellationError {
                return pass
            } catch let error as StoreHistoryError {
                pass.failed += 1
                metrics.countStorePoll(store: label, result: error.result)
                if case .quota(let retryAfter) = error.kind {
                    pass.quotaSpent = true
                    quietUntil.withLock { $0 = clock.now.addingTimeInterval(quotaWait(retryAfter).seconds) }
                }
                logFailure(
                    kind: error.result, "reading the store's history failed; read again next pass", stream: stream,
                    error: "\(error)")
            } catch {
                pass.failed += 1
                metrics.countStorePoll(store: label, result: "ledger")
                logFailure(
                    kind: "ledger", "recording the store's history failed; read again next pass", stream: stream,
                    error: "\(error)")
            }
        }
        // A pass that read nothing itself (another instance holds every stream) says nothing of the history's health;
        // one that left a window unfinished has not read the history whole.
        if pass.failed == 0, pass.heldElsewhere + pass.notDue < source.streams.count {
            if pass.incomplete > 0 {
                metrics.countStorePoll(store: label, result: "incomplete")
                logFailure(
                    kind: "incomplete", "the store's history has more than a pass reads; read on next pass",
                    stream: nil, error: "\(pass.incomplete) streams unfinished after \(pass.pages) pages",
                    level: .warning)
            } else {
                metrics.countStorePoll(store: label, result: "complete")
            }
        }
        await reportCompletion()
        return pass
    }

    /// How long the store is left alone after a spent quota: an interval, or the store's wait when longer (a day at
    /// most).
    func quotaWait(_ retryAfter: Duration?) -> Duration {
        min(max(retryAfter ?? configuration.interval, configuration.interval), .seconds(86_400))
    }

    /// Logs a failure of `kind` if none of that kind was logged for the store within ``Configuration/errorLogInterval``;
    /// otherwise counts it, and the next line logged says how many it stands for (`log.repeated`).
    func logFailure(
        kind: String, _ message: Logger.Message, stream: String?, error: String, level: Logger.Level = .error
    ) {
        let now = clock.now
        let interval = configuration.errorLogInterval.seconds
        let repeated = errorLog.withLock { log -> Int? in
            if let last = log[kind], now.timeIntervalSince(last.at) < interval, now >= last.at {
                log[kind]?.repeated += 1
                return nil
            }
            defer { log[kind] = (now, 0) }
            return log[kind]?.repeated ?? 0
        }
        guard let repeated else { return }
        var metadata: Logger.Metadata = ["iap.store": "\(label)", "iap.error": "\(error)"]
        if let stream { metadata["iap.stream"] = "\(stream)" }
        if repeated > 0 { metadata["log.repeated"] = "\(repeated)" }
        logger.log(level: level, message, metadata: metadata)
    }

    /// Sets `iap_store_poll_last_complete_timestamp_seconds{store}` from the ledger's positions, the same on every
    /// instance whichever read: the earliest time a stream's window was last read to its end (nothing until every
    /// stream's has been). A window another instance leaves unfinished holds it back; a restarted instance reports it
    /// at its first pass.
    func reportCompletion() async {
        let (refunds, names) = (positions, names)
        guard
            let marks = try? await recorder.deadline.run(
                "read the history positions", { try await refunds.historyPolls() })
        else { return }
        let completed = marks.filter { names.contains($0.name) }
        guard completed.count == names.count, case let times = completed.compactMap(\.lastSuccess),
            times.count == names.count, let earliest = times.min()
        else { return }
        metrics.setStorePollCompleted(store: label, at: earliest.timeIntervalSince1970)
    }

    /// Reads `stream`'s window from where its position stands, page by page, saving the position after each.
    func poll(_ stream: String, into pass: inout Pass) async throws {
        let now = clock.now
        let (refunds, owner, name, policy) = (positions, owner, positionName(stream), policy)
        let until = now.addingTimeInterval(policy.lease.seconds)
        guard
            let claimed = try await recorder.deadline.run(
                "claim a history position",
                { try await refunds.claimHistoryPoll(name: name, owner: owner, until: until, now: now) })
        else {
            pass.heldElsewhere += 1
            return
        }
        guard policy.isDue(claimed, now: now) else {
            _ = try await recorder.deadline.run(
                "release a history position",
                { try await refunds.saveHistoryPoll(claimed, owner: owner, leaseUntil: nil) })
            pass.notDue += 1
            return
        }
        var mark = policy.window(from: claimed, now: now)
        // A page read counts; a window restarted for a refused token does not (it may be the only page allowed).
        var pages = 0
        while pages < policy.maxPages {
            let request = HistoryPageRequest(
                stream: stream, start: mark.windowStart ?? policy.earliest(now: now), end: mark.windowEnd ?? now,
                pageToken: mark.paginationToken)
            let page: HistoryPage
            switch await fetch(request) {
            case .success(let fetched):
                page = fetched
            case .failure(let error) where error.kind == .startTooFarInPast:
                guard let narrowed = policy.narrowed(mark, now: now) else { throw error }
                mark = narrowed
                logWindowChange(
                    "the store refused the window's start as older than the history it keeps; reading a shorter window",
                    name, mark, error, now: now)
                continue
            case .failure(let error) where error.kind == .pageTokenRefused && mark.paginationToken != nil:
                mark = policy.resumedAfterRefusedToken(mark, now: now)
                logWindowChange(
                    "the store refused a page token; reading on from the pages already read", name, mark, error,
                    now: now)
                continue
            case .failure(let error):
                if case .quota(let retryAfter) = error.kind {
                    // The quota is the store's, not this instance's: the position is held, as it stands, until the
                    // wait is over, so no other instance asks meanwhile either.
                    let (held, until) = (mark, clock.now.addingTimeInterval(quotaWait(retryAfter).seconds))
                    _ = try? await recorder.deadline.run(
                        "hold a history position",
                        { try await refunds.saveHistoryPoll(held, owner: owner, leaseUntil: until) })
                }
                throw error
            }
            pass.pages += 1
            pages += 1
            let source = RefusedNotification.Source.history(
                store: self.source.store, type: stream, from: request.start, to: request.end)
            var latest: Date?
            for item in page.items {
                if try await takeIn(item, source: source) {
                    pass.notifications += 1
                    // A time past the window's end is not believed as how far it was read (the others still are).
                    if let time = item.time, time <= (mark.windowEnd ?? now) { latest = max(latest ?? time, time) }
                } else {
                    pass.refused += 1
                }
            }
            mark = policy.afterPage(mark, latest: latest, nextPageToken: page.nextPageToken, now: clock.now)
            let (saved, leaseUntil) = (mark, policy.leaseEnd(readingOn: page.nextPageToken != nil, now: clock.now))
            guard
                try await recorder.deadline.run(
                    "save a history position",
                    { try await refunds.saveHistoryPoll(saved, owner: owner, leaseUntil: leaseUntil) })
            else {
                logger.warning(
                    "another instance took over reading the store's history",
                    metadata: ["iap.store": "\(label)", "iap.poll": "\(name)"])
                return
            }
            if page.nextPageToken == nil { return }
        }
        pass.incomplete += 1
    }

    /// Says that a refusal of the store moved the window's start, and where to.
    func logWindowChange(
        _ message: Logger.Message, _ name: String, _ mark: HistoryPollMark, _ error: StoreHistoryError, now: Date
    ) {
        logger.warning(
            message,
            metadata: [
                "iap.store": "\(label)", "iap.poll": "\(name)",
                "iap.window_start": "\(RFC3339.string(mark.windowStart ?? now))", "iap.error": "\(error)",
            ])
    }

    func fetch(_ request: HistoryPageRequest) async -> Result<HistoryPage, StoreHistoryError> {
        do {
            return .success(try await source.page(request, receivedAt: clock.now))
        } catch {
            return .failure(error)
        }
    }

    /// Takes in one item: `true` when believed (recorded), `false` when refused (kept and counted). Throws what the
    /// ledger or the publisher threw.
    func takeIn(_ item: HistoryPage.Item, source: String) async throws -> Bool {
        guard
            let refusal = try await recorder.takeIn(
                item.read, body: item.body, source: source, metrics: metrics, unknownStore: label)
        else { return true }
        var metadata: Logger.Metadata = [
            "iap.store": "\(label)", "iap.refusal": "\(refusal.code)", "iap.detail": "\(refusal.detail)",
            "iap.source": "\(source)",
        ]
        if let claimed = refusal.claimedId { metadata["iap.claimed_id"] = "\(claimed)" }
        logger.warning("an item of the store's history was refused", metadata: metadata)
        return false
    }
}

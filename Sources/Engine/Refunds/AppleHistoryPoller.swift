import Foundation
import Fulfilment
import Logging
import ServiceLifecycle
import Wire

/// Reads Apple's Get Notification History for the refund types and consumption requests, on an interval, and takes in
/// each notification as the intake does (verified first; believed ones recorded and carried out, refused ones kept and
/// counted). Where each type's reading stands is kept in the ledger (``HistoryPollMark``): a restart or another
/// instance resumes from it, mid-window from its page; on PostgreSQL one instance at a time holds it (a lease).
///
/// A window starts an overlap before the previous one ended (notifications are recorded once by their UUID, so reading
/// one again changes nothing) and never before what the history keeps; the first one reaches back as far as it does.
public final class AppleHistoryPoller: Service {
    public struct Configuration: Sendable, Hashable {
        /// Between passes (`refunds.apple.interval_ms`).
        public var interval: Duration
        /// How long a pass holds a type's position past its last page before another instance may take it (renewed
        /// with each page saved, given up when the window is read to its end): what a pass cut short by a crash costs.
        public var lease: Duration
        /// Apple's notification types read, each its own position.
        public var types: [String]
        /// How far back Apple's history reaches for the environment: 180 days in production, 30 in the sandbox. A first
        /// window reaches back a day less (a window cut short then has a day to be read on from its page).
        public var historyKept: Duration
        /// How far each window reaches back over the previous one: a notification that appears in the history late, or
        /// instances whose clocks disagree, are still read (reading one again changes nothing).
        public var overlap: Duration
        /// Pages read per type and pass at most; the rest waits for the next pass.
        public var maxPages: Int

        public init(
            interval: Duration = .seconds(300), lease: Duration = .seconds(120),
            types: [String] = ["REFUND", "REFUND_REVERSED", "REFUND_DECLINED", "CONSUMPTION_REQUEST"],
            historyKept: Duration = AppleHistoryPoller.productionHistory, overlap: Duration = .seconds(6 * 3_600),
            maxPages: Int = 100
        ) {
            self.interval = interval
            self.lease = lease
            self.types = types
            self.historyKept = historyKept
            self.overlap = overlap
            self.maxPages = maxPages
        }
    }

    /// Apple's history in production: 180 days.
    public static let productionHistory: Duration = .seconds(180 * 86_400)
    /// Apple's history in the sandbox: 30 days.
    public static let sandboxHistory: Duration = .seconds(30 * 86_400)
    /// Apple's errorCode for a `startDate` before the history it keeps (StartDateTooFarInPastError).
    static let startDateTooFarInPast: Int64 = 4_000_012
    /// The shortest window a refused start date narrows to.
    static let narrowestReach: TimeInterval = 86_400

    /// What one pass did.
    public struct Pass: Sendable, Hashable {
        public var pages = 0
        public var notifications = 0
        public var refused = 0
        /// Types another instance was reading.
        public var heldElsewhere = 0
        /// Types whose last window was read to its end less than an interval ago (by any instance).
        public var notDue = 0
        /// Types whose reading failed (the App Store Server API or the ledger); they are read again next pass.
        public var failed = 0
        /// Types whose window was not read to its end within the pass's pages (read on next pass).
        public var incomplete = 0
    }

    let api: any AppStoreServerAPI
    let reader: any StoreNotificationReading
    let recorder: RefundRecorder
    let configuration: Configuration
    /// This instance's name in the leases.
    let owner: String
    let metrics: any EngineMetrics
    let clock: any WorkerClock
    let logger: Logger

    public init(
        api: any AppStoreServerAPI, reader: any StoreNotificationReading, recorder: RefundRecorder,
        configuration: Configuration, owner: String, metrics: any EngineMetrics, clock: any WorkerClock = .system,
        logger: Logger
    ) {
        self.api = api
        self.reader = reader
        self.recorder = recorder
        self.configuration = configuration
        self.owner = owner
        self.metrics = metrics
        self.clock = clock
        self.logger = logger
    }

    public func run() async throws {
        await runPeriodically(every: configuration.interval, on: clock) { _ = await self.pollOnce() }
        // Stopped (a rolling restart): a window left mid-page is free for the next reader at once, not after its lease.
        await releaseLeases()
    }

    /// Gives up the leases this instance holds (positions unchanged); best effort, at shutdown.
    func releaseLeases() async {
        let (refunds, owner, names) = (recorder.refunds, owner, Set(configuration.types.map { "apple:\($0)" }))
        do {
            try await recorder.deadline.run("release the history positions") {
                for mark in try await refunds.historyPolls() where names.contains(mark.name) {
                    _ = try await refunds.saveHistoryPoll(mark, owner: owner, leaseUntil: nil)
                }
            }
        } catch {
            logger.warning(
                "the history positions' leases could not be given up; they run out by themselves",
                metadata: ["iap.error": "\(error)"])
        }
    }

    /// One pass over every type; never throws (a failure is logged, counted, and read again next pass).
    public func pollOnce() async -> Pass {
        var pass = Pass()
        for type in configuration.types {
            do {
                try await poll(type, into: &pass)
            } catch is CancellationError {
                return pass
            } catch let error as AppStoreError {
                pass.failed += 1
                metrics.countStorePoll(store: Store.apple.rawValue, result: error.code.description)
                logger.error(
                    "reading Apple's notification history failed; read again next pass",
                    metadata: ["iap.notification_type": "\(type)", "iap.error": "\(error)"])
            } catch {
                pass.failed += 1
                metrics.countStorePoll(store: Store.apple.rawValue, result: "ledger")
                logger.error(
                    "recording Apple's notification history failed; read again next pass",
                    metadata: ["iap.notification_type": "\(type)", "iap.error": "\(error)"])
            }
        }
        // A pass that read nothing itself (another instance holds every type) says nothing of the history's health;
        // one that left a window unfinished has not read the history whole.
        if pass.failed == 0, pass.heldElsewhere + pass.notDue < configuration.types.count {
            if pass.incomplete > 0 {
                metrics.countStorePoll(store: Store.apple.rawValue, result: "incomplete")
                logger.warning(
                    "Apple's notification history has more than a pass reads; read on next pass",
                    metadata: ["iap.incomplete_types": "\(pass.incomplete)", "iap.pages": "\(pass.pages)"])
            } else {
                metrics.countStorePoll(store: Store.apple.rawValue, result: "complete")
            }
        }
        await reportCompletion()
        return pass
    }

    /// Sets `iap_store_poll_last_complete_timestamp_seconds` from the ledger's positions, the same on every instance
    /// whichever read: the earliest time a type's window was last read to its end (0 until every type's has been). A
    /// window another instance leaves unfinished holds it back; a restarted instance reports it at its first pass.
    func reportCompletion() async {
        let (refunds, names) = (recorder.refunds, Set(configuration.types.map { "apple:\($0)" }))
        guard
            let marks = try? await recorder.deadline.run(
                "read the history positions", { try await refunds.historyPolls() })
        else { return }
        let completed = marks.filter { names.contains($0.name) }
        guard completed.count == names.count, case let times = completed.compactMap(\.lastSuccess),
            times.count == names.count, let earliest = times.min()
        else { return }
        metrics.setStorePollCompleted(store: Store.apple.rawValue, at: earliest.timeIntervalSince1970)
    }

    /// Reads `type`'s window from where its position stands, page by page, saving the position after each.
    func poll(_ type: String, into pass: inout Pass) async throws {
        let now = clock.now
        let (refunds, owner, name) = (recorder.refunds, owner, "apple:\(type)")
        let until = now.addingTimeInterval(configuration.lease.seconds)
        guard
            var mark = try await recorder.deadline.run(
                "claim a history position",
                {
                    try await refunds.claimHistoryPoll(name: name, owner: owner, until: until, now: now)
                })
        else {
            pass.heldElsewhere += 1
            return
        }
        // A window read to its end is read again once an interval has passed since it began, by whichever instance
        // comes first: several instances never read one type more often than one would.
        if mark.paginationToken == nil, let end = mark.windowEnd,
            now < end.addingTimeInterval(configuration.interval.seconds)
        {
            let unchanged = mark
            _ = try await recorder.deadline.run(
                "release a history position",
                { try await refunds.saveHistoryPoll(unchanged, owner: owner, leaseUntil: nil) })
            pass.notDue += 1
            return
        }
        let earliest = now.addingTimeInterval(-configuration.historyKept.seconds + 86_400)
        // A window cut short is read on from its page while Apple still accepts its start (the history kept, less an
        // hour for clocks that disagree).
        let accepted = now.addingTimeInterval(-configuration.historyKept.seconds + 3_600)
        if let start = mark.windowStart, mark.paginationToken != nil, mark.windowEnd != nil, start >= accepted {
            // Resumed as it stood.
        } else {
            // A new window: from an overlap before the last one ended — or, for one cut short whose start Apple no
            // longer accepts, from that start as far as the history still reaches (its unread pages are read again,
            // never skipped) — to now.
            let from: Date
            if mark.paginationToken != nil, let start = mark.windowStart {
                from = start
            } else {
                from = mark.windowEnd.map { $0.addingTimeInterval(-configuration.overlap.seconds) } ?? earliest
            }
            mark.windowStart = max(earliest, min(from, now))
            mark.windowEnd = now
            mark.paginationToken = nil
            mark.readThrough = nil
        }
        // A page read counts; a window restarted for an expired token does not (it may be the only page allowed).
        var pages = 0
        while pages < max(1, configuration.maxPages) {
            let request = NotificationHistoryRequest(
                startDate: mark.windowStart ?? earliest, endDate: mark.windowEnd ?? now, notificationType: type,
                paginationToken: mark.paginationToken)
            let page: NotificationHistoryPage
            switch await fetch(request) {
            case .success(let fetched):
                page = fetched
            case .failure(let error)
            where error.appleErrorCode == Self.startDateTooFarInPast
                && (mark.windowEnd ?? now).timeIntervalSince(mark.windowStart ?? earliest) > Self.narrowestReach:
                // Apple keeps less history than configured (the sandbox's 30 days for a key configured as
                // production, say): the window starts half as far back and reading goes on; never a failure for ever.
                let end = mark.windowEnd ?? now
                let reach = end.timeIntervalSince(mark.windowStart ?? earliest)
                mark.windowStart = end.addingTimeInterval(-max(Self.narrowestReach, reach / 2))
                mark.paginationToken = nil
                logger.warning(
                    "Apple refused the window's start as older than the history it keeps; reading a shorter window",
                    metadata: [
                        "iap.poll": "\(name)", "iap.window_start": "\(RFC3339.string(mark.windowStart ?? end))",
                        "iap.error": "\(error)",
                    ])
                continue
            case .failure(let error):
                guard error.code == .invalidRequest, mark.paginationToken != nil else { throw error }
                // A pagination token Apple no longer takes (PaginationTokenExpiredError, InvalidPaginationTokenError):
                // the window goes on from where its pages read so far reach, a second before (what is read again is
                // recorded once by its UUID) — never from its first page again, which a window longer than a pass
                // whose token expires between passes would do for ever.
                if let through = mark.readThrough, let start = mark.windowStart, through > start {
                    mark.windowStart = min(through.addingTimeInterval(-1), mark.windowEnd ?? now)
                }
                logger.warning(
                    "Apple refused a pagination token; reading on from the pages already read",
                    metadata: [
                        "iap.poll": "\(name)", "iap.window_start": "\(RFC3339.string(mark.windowStart ?? earliest))",
                        "iap.error": "\(error)",
                    ])
                mark.paginationToken = nil
                continue
            }
            pass.pages += 1
            pages += 1
            let source = RefusedNotification.Source.history(
                store: .apple, type: type, from: request.startDate, to: request.endDate)
            for payload in page.signedPayloads {
                if try await takeIn(payload, source: source) {
                    pass.notifications += 1
                    // Believed, so its signature verified: its signed time is Apple's.
                    if let signed = Self.signedDate(of: payload), signed <= (mark.windowEnd ?? now) {
                        mark.readThrough = max(mark.readThrough ?? signed, signed)
                    }
                } else {
                    pass.refused += 1
                }
            }
            if page.hasMore {
                mark.paginationToken = page.paginationToken
            } else {
                mark.paginationToken = nil
                mark.readThrough = nil
                mark.lastSuccess = clock.now
            }
            // Reading on renews the lease; a window read to its end gives it up.
            let (saved, leaseUntil) = (
                mark, page.hasMore ? clock.now.addingTimeInterval(configuration.lease.seconds) : nil
            )
            guard
                try await recorder.deadline.run(
                    "save a history position",
                    {
                        try await refunds.saveHistoryPoll(saved, owner: owner, leaseUntil: leaseUntil)
                    })
            else {
                logger.warning("another instance took over reading Apple's history", metadata: ["iap.poll": "\(name)"])
                return
            }
            if !page.hasMore { return }
        }
        pass.incomplete += 1
    }

    /// The `signedDate` of a JWS's payload (not verified here: only for one the reader believed).
    static func signedDate(of jws: String) -> Date? {
        let parts = jws.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1].count <= 1 << 20, let payload = Base64URL.decode(parts[1]),
            let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any],
            let millis = object["signedDate"] as? NSNumber, millis.doubleValue.isFinite
        else { return nil }
        return Date(timeIntervalSince1970: millis.doubleValue / 1_000)
    }

    func fetch(_ request: NotificationHistoryRequest) async -> Result<NotificationHistoryPage, AppStoreError> {
        do {
            return .success(try await api.notificationHistory(request))
        } catch {
            return .failure(error)
        }
    }

    /// Verifies and takes in one notification: `true` when believed (recorded), `false` when refused (kept and
    /// counted). Throws what the ledger or the publisher threw.
    func takeIn(_ signedPayload: String, source: String) async throws -> Bool {
        let read = await reader.readAppleSignedPayload(signedPayload, receivedAt: clock.now).map {
            ReadNotification(notification: $0, channel: .appleNotificationHistory)
        }
        guard
            let refusal = try await recorder.takeIn(
                read, body: Array(signedPayload.utf8), source: source, metrics: metrics, unknownStore: "apple")
        else { return true }
        logger.warning(
            "notification from Apple's history refused",
            metadata: ["iap.refusal": "\(refusal.code)", "iap.detail": "\(refusal.detail)", "iap.source": "\(source)"])
        return false
    }
}

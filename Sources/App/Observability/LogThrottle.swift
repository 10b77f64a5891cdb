import Dispatch
import Logging
import Synchronization

/// Repeated warnings and errors of one kind — one logger, one message — written at most once per ``interval``: the
/// first at once; those that follow within the interval are counted, and when it ends the last of them is written
/// with `log.repeated` (how many lines it stands for) and `log.repeated_within_s`. A fault that lasts (a ledger
/// that cannot write, a broker that refuses, a poller that fails) then costs a line per kind every interval, never a
/// line per purchase or per attempt: on a host where the log and the ledger share a disk, the log cannot fill it.
///
/// Outcome lines (metadata `iap.outcome`: one per message, what support searches) and lines below `warning` pass
/// untouched.
public final class LogThrottle: Sendable {
    public static let shared = LogThrottle(interval: .seconds(10))

    public let interval: Duration
    /// Kinds remembered at most; beyond, lines pass unthrottled rather than grow the table without bound.
    public let maxKinds: Int
    private let now: @Sendable () -> ContinuousClock.Instant
    /// Whether a window that starts counting schedules its own summary (off for tests, which call ``flushDue()``).
    private let schedulesSummaries: Bool

    private struct Window {
        var ends: ContinuousClock.Instant
        var suppressed = 0
        /// Writes the summary for `count` lines: the last suppressed line, with the count.
        var summary: (@Sendable (Int) -> Void)?
    }
    private let windows = Mutex<[String: Window]>([:])

    public init(
        interval: Duration, maxKinds: Int = 4_096, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
        schedulesSummaries: Bool = true
    ) {
        self.interval = interval
        self.maxKinds = maxKinds
        self.now = now
        self.schedulesSummaries = schedulesSummaries
    }

    /// Whether a line of kind `key` is written now. When it is not, it is counted, and `summary` (the line with the
    /// count) is what the window's end writes.
    public func admit(_ key: String, summary: @escaping @Sendable (Int) -> Void) -> Bool {
        let now = now()
        enum Verdict {
            case write
            /// The window that ended still counted lines its scheduled summary has not written yet: said first.
            case summarizeThenWrite(@Sendable (Int) -> Void, Int)
            case suppressFirst(ContinuousClock.Instant)
            case suppress
        }
        let verdict = windows.withLock { windows -> Verdict in
            if var window = windows[key], now < window.ends {
                window.suppressed += 1
                window.summary = summary
                windows[key] = window
                return window.suppressed == 1 ? .suppressFirst(window.ends) : .suppress
            }
            if let ended = windows[key], ended.suppressed > 0, let pending = ended.summary {
                windows[key] = Window(ends: now + interval)
                return .summarizeThenWrite(pending, ended.suppressed)
            }
            if windows[key] == nil, windows.count >= maxKinds {
                windows = windows.filter { now < $0.value.ends || $0.value.suppressed > 0 }
                if windows.count >= maxKinds { return .write }
            }
            windows[key] = Window(ends: now + interval)
            return .write
        }
        switch verdict {
        case .write:
            return true
        case .summarizeThenWrite(let pending, let count):
            pending(count)
            return true
        case .suppressFirst(let ends):
            if schedulesSummaries {
                let delay = max(.zero, ends - now)
                DispatchQueue.global().asyncAfter(
                    deadline: .now() + .nanoseconds(Int(delay / .nanoseconds(1)) + 1_000_000)
                ) {
                    [self] in flushDue()
                }
            }
            return false
        case .suppress:
            return false
        }
    }

    /// Writes the summary of every window with lines counted, ended or not: at a clean stop, before the last flush.
    public func flushAll() {
        let due = windows.withLock { windows -> [(summary: @Sendable (Int) -> Void, count: Int)] in
            defer { windows = [:] }
            return windows.values.compactMap { window in
                guard window.suppressed > 0, let summary = window.summary else { return nil }
                return (summary, window.suppressed)
            }
        }
        for (summary, count) in due { summary(count) }
    }

    /// Writes the summary of every window that ended with lines counted, and forgets windows long over.
    public func flushDue() {
        let now = now()
        let due = windows.withLock { windows -> [(summary: @Sendable (Int) -> Void, count: Int)] in
            var due: [(summary: @Sendable (Int) -> Void, count: Int)] = []
            for (key, window) in windows where window.ends <= now {
                if window.suppressed > 0, let summary = window.summary {
                    due.append((summary, window.suppressed))
                    // The summary opens the next window: a fault that lasts is said once per interval.
                    windows[key] = Window(ends: now + interval)
                } else {
                    windows[key] = nil
                }
            }
            return due
        }
        for (summary, count) in due { summary(count) }
    }
}

/// A log handler that writes through ``LogThrottle``: the worker's (see ``LoggingSetup``).
public struct ThrottledLogHandler: LogHandler {
    private var base: any LogHandler
    private let label: String
    private let throttle: LogThrottle

    public init(_ base: any LogHandler, label: String, throttle: LogThrottle = .shared) {
        self.base = base
        self.label = label
        self.throttle = throttle
    }

    public var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }

    public var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    public func log(event: LogEvent) {
        guard event.level >= .warning, event.metadata?["iap.outcome"] == nil else { return base.log(event: event) }
        let base = base
        let seconds = throttle.interval.components.seconds
        let admitted = throttle.admit("\(label)\u{1}\(event.message)") { count in
            var summary = event
            var metadata = summary.metadata ?? [:]
            metadata["log.repeated"] = "\(count)"
            metadata["log.repeated_within_s"] = "\(seconds)"
            summary.metadata = metadata
            base.log(event: summary)
        }
        if admitted { base.log(event: event) }
    }
}

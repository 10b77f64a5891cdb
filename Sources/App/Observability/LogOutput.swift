import Dispatch
import Foundation
import Fulfilment
import Synchronization
import Wire

#if canImport(Glibc)
    import Glibc
#endif

/// Where the JSON log lines go: a file descriptor (standard output), written in batches.
///
/// Lines are appended to a buffer and written by one `write(2)` for many: within ``flushInterval`` of the first
/// line buffered, at once when the buffer holds ``flushBytes``, and at once for a line at `warning` or above.
/// ``flush()`` writes what is buffered; `run` calls it when it stops and ``standardOutput`` is flushed again at exit
/// (`atexit`), so a SIGTERM loses no line. A crash (a trap, `kill -9`, the OOM killer) loses the info lines of the
/// last 50 ms at most, and can lose a warning logged just before it. Lines are written whole and in order: one
/// writer at a time takes everything buffered up to then.
///
/// An output that stops taking data (a log collector that stalls) never holds up a thread that logs: the writes
/// that may wait are a background writer's, on its own queue. A thread that logs writes itself only to a
/// non-blocking output that is free and was taking data; what cannot be written is put back at the front of the
/// buffer, so a line half written is finished first, never cut. The buffer, with what the writer holds, stays
/// within ``maxBufferedBytes`` (and one line reporting drops): while it is full, new lines are dropped, and a warning
/// line says how many once everything before them is out. At exit the flush waits for a blocking output as long as
/// it takes, for a non-blocking one up to ``stallLimit``.
public final class LogOutput: Sendable {
    /// Standard output, flushed within 50 ms.
    public static let standardOutput = LogOutput(descriptor: STDOUT_FILENO)

    private struct Pending {
        var bytes: [UInt8] = []
        /// Bytes a writer took and has not written yet: counted against the bound.
        var inFlight = 0
        /// When the earliest background flush queued since the last write will run; `nil` when none is.
        var nextFlush: DispatchTime?
        /// The last write found the output full: threads that log leave the next ones to the background writer.
        var stalled = false
        /// Lines refused because the buffer was full, not yet reported.
        var dropped = 0

        /// Asks for a background flush `delay` from now; the time to queue one at, unless one runs by then already.
        mutating func flush(after delay: Duration) -> DispatchTime? {
            let at = DispatchTime.now() + LogOutput.dispatchInterval(delay)
            if let nextFlush, nextFlush <= at { return nil }
            nextFlush = at
            return at
        }
    }

    private let descriptor: Int32
    private let pending = Mutex(Pending())
    /// Held while writing, so a later flush never overtakes an earlier one.
    private let writing = Mutex(())
    /// The background writer: the flush interval's writes, and what a thread that logs does not write itself.
    private let background = DispatchQueue(label: "iap-worker.log-output")
    public let flushInterval: Duration
    public let flushBytes: Int
    public let maxBufferedBytes: Int
    /// How long the background writer waits for a non-blocking output that takes nothing before it tries again later.
    public let stallLimit: Duration

    public init(
        descriptor: Int32, flushInterval: Duration = .milliseconds(50), flushBytes: Int = 64 << 10,
        maxBufferedBytes: Int = 16 << 20, stallLimit: Duration = .seconds(5)
    ) {
        self.descriptor = descriptor
        self.flushInterval = flushInterval
        self.flushBytes = flushBytes
        self.maxBufferedBytes = max(maxBufferedBytes, flushBytes)
        self.stallLimit = stallLimit
        Self.registerExitFlush()
    }

    /// Bytes buffered or held by a writer, not yet written.
    public var bufferedBytes: Int { pending.withLock { $0.bytes.count + $0.inFlight } }

    /// Buffers `line` (a whole line, newline included); writes at once when `urgent` or the buffer is full.
    public func write(_ line: String, urgent: Bool) {
        enum Action {
            case writeNow
            case queue(DispatchTime?)
        }
        let action = pending.withLock { pending -> Action in
            if pending.bytes.count + pending.inFlight + line.utf8.count > maxBufferedBytes {
                pending.dropped += 1
            } else {
                pending.bytes.append(contentsOf: line.utf8)
                if urgent || pending.bytes.count >= flushBytes {
                    // While the output is stalled, the background writer's next try takes these too.
                    return pending.stalled ? .queue(pending.flush(after: .zero)) : .writeNow
                }
            }
            return .queue(pending.flush(after: flushInterval))
        }
        switch action {
        case .writeNow:
            // Here only when it cannot wait: a non-blocking output, and no other writer. Else the background's, now.
            let written =
                outputIsNonBlocking
                ? writing.withLockIfAvailable { _ in writeBuffered(waiting: false) } ?? false : false
            if !written { queueFlush(at: pending.withLock { $0.flush(after: .zero) }) }
        case .queue(let at):
            queueFlush(at: at)
        }
    }

    /// Writes everything buffered now, waiting up to ``stallLimit`` for a non-blocking output that takes nothing
    /// (a blocking one as long as it takes); what is left is tried again a second later.
    public func flush() {
        let written = writing.withLock { _ in writeBuffered(waiting: true) }
        if !written { queueFlush(at: pending.withLock { $0.flush(after: .seconds(1)) }) }
    }

    private var outputIsNonBlocking: Bool {
        let flags = fcntl(descriptor, F_GETFL)
        return flags >= 0 && flags & O_NONBLOCK != 0
    }

    private func queueFlush(at time: DispatchTime?) {
        guard let time else { return }
        background.asyncAfter(deadline: time) { [self] in flush() }
    }

    /// Writes what is buffered (with `writing` held), then says how many lines were dropped if any were; `false`
    /// when the output stopped taking data before the end, in which case what is left is back at the front.
    private func writeBuffered(waiting: Bool) -> Bool {
        let bytes = pending.withLock { pending -> [UInt8] in
            pending.nextFlush = nil
            let bytes = pending.bytes
            pending.bytes = []
            pending.bytes.reserveCapacity(min(bytes.count, 4 * flushBytes))
            pending.inFlight = bytes.count
            return bytes
        }
        var remainder = bytes[...]
        var finished = write(&remainder, waiting: waiting)
        // Dropped lines are reported once everything before them is out, so at most one report waits at a time.
        let dropped = pending.withLock { pending -> Int in
            guard finished else { return 0 }
            defer { pending.dropped = 0 }
            return pending.dropped
        }
        if dropped > 0 {
            remainder = Self.droppedNotice(dropped)[...]
            finished = write(&remainder, waiting: false)
        }
        pending.withLock { pending in
            pending.inFlight = 0
            pending.stalled = !finished
            if !finished { pending.bytes.insert(contentsOf: remainder, at: 0) }
        }
        return finished
    }
    /// Writes `bytes` from the front; `false` (with the rest left in `bytes`) when the output stopped taking data.
    /// Other errors (a closed output, a full disk) end the write: what was taken is dropped, and a line cut by the
    /// error is ended, so the next write starts a line of its own.
    private func write(_ bytes: inout ArraySlice<UInt8>, waiting: Bool) -> Bool {
        let pollMilliseconds: Int32 = 100
        let maxStalls = max(1, Int(stallLimit / .milliseconds(Int64(pollMilliseconds))))
        var stalls = 0
        var midLine = false
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress!, $0.count) }
            if written > 0 {
                midLine = bytes[bytes.startIndex + written - 1] != UInt8(ascii: "\n")
                bytes = bytes.dropFirst(written)
                stalls = 0
                continue
            }
            if written < 0, errno == EINTR { continue }
            guard written < 0, errno == EAGAIN || errno == EWOULDBLOCK else {
                if midLine { _ = Glibc.write(descriptor, "\n", 1) }
                return true
            }
            guard waiting, stalls < maxStalls else { return false }
            stalls += 1
            var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
            _ = poll(&ready, 1, pollMilliseconds)
        }
        return true
    }

    /// The line that reports dropped lines, in the JSON log format.
    private static func droppedNotice(_ count: Int) -> [UInt8] {
        Array(
            (#"{"ts":""# + RFC3339.string(Date())
                + #"","level":"warning","logger":"iap-worker.log-output","msg":"log lines dropped: standard output took nothing while the buffer was full","log.dropped_lines":""#
                + "\(count)\"}\n").utf8)
    }

    fileprivate static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(Int(clamping: seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000))
    }

    /// ``standardOutput`` is flushed when the process exits normally (`exit`, or returning from `main`).
    private static func registerExitFlush() {
        _ = exitFlushRegistered
    }

    private static let exitFlushRegistered: Bool = {
        atexit { LogOutput.standardOutput.flush() }
        return true
    }()
}

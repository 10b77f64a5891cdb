import Dispatch
import Foundation
import Fulfilment
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Where the JSON log lines go: a file descriptor (standard output), written in batches.
///
/// Lines are appended to a buffer and written by one `write(2)` for many: within ``flushInterval`` of the first
/// line buffered, at once when the buffer holds ``flushBytes``, and at once for a line at `warning` or above (an
/// error is never held back behind a crash). ``flush()`` writes what is buffered; `run` calls it when it stops and
/// ``standardOutput`` is flushed again at exit (`atexit`), so a SIGTERM loses no line. A crash (a trap, `kill -9`,
/// the OOM killer) loses the info lines of the last 50 ms at most. Lines are written whole and in order: one writer
/// at a time takes everything buffered up to then.
///
/// An output that stops taking data (a non-blocking pipe whose reader stalls) never holds up the thread that logs:
/// a line logged then stays buffered, and the wait for the output is the background writer's, which keeps what it
/// could not write at the front of the buffer — a line half written is finished first, never cut. While the buffer
/// is at ``maxBufferedBytes`` new lines are dropped, and a line saying how many follows once the output takes data
/// again.
public final class LogOutput: Sendable {
    /// Standard output, flushed within 50 ms.
    public static let standardOutput = LogOutput(descriptor: STDOUT_FILENO)

    private struct Pending {
        var bytes: [UInt8] = []
        /// A background flush is queued for what is buffered.
        var scheduled = false
        /// Lines refused because the buffer was full, not yet reported.
        var dropped = 0
    }

    private enum Action {
        case none, writeNow, schedule
    }

    private let descriptor: Int32
    private let pending = Mutex(Pending())
    /// Held while writing, so a later flush never overtakes an earlier one.
    private let writing = Mutex(())
    /// The background writer: the flush interval's writes, and what a logging thread could not write at once.
    private let background = DispatchQueue(label: "iap-worker.log-output")
    public let flushInterval: Duration
    public let flushBytes: Int
    public let maxBufferedBytes: Int
    /// How long the background writer waits for an output that takes nothing before it leaves the rest for later.
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

    /// Buffers `line` (a whole line, newline included); writes at once when `urgent` or the buffer is full.
    public func write(_ line: String, urgent: Bool) {
        let action = pending.withLock { pending -> Action in
            guard pending.bytes.count + line.utf8.count <= maxBufferedBytes else {
                pending.dropped += 1
                return .none
            }
            pending.bytes.append(contentsOf: line.utf8)
            if urgent || pending.bytes.count >= flushBytes { return .writeNow }
            guard !pending.scheduled else { return .none }
            pending.scheduled = true
            return .schedule
        }
        switch action {
        case .none:
            break
        case .writeNow:
            // On this thread if nobody is writing and the output takes it all; otherwise the background writer's.
            let written = writing.withLockIfAvailable { _ in writeBuffered(waiting: false) } ?? false
            if !written { scheduleBackgroundFlush(after: .zero) }
        case .schedule:
            background.asyncAfter(deadline: .now() + Self.dispatchInterval(flushInterval)) { [self] in flush() }
        }
    }

    /// Writes everything buffered now, waiting up to ``stallLimit`` for an output that takes nothing.
    public func flush() {
        let written = writing.withLock { _ in writeBuffered(waiting: true) }
        if !written { scheduleBackgroundFlush(after: .seconds(1)) }
    }

    /// Queues a background flush unless one is queued already.
    private func scheduleBackgroundFlush(after delay: Duration) {
        let schedule = pending.withLock { pending -> Bool in
            guard !pending.scheduled else { return false }
            pending.scheduled = true
            return true
        }
        if schedule {
            background.asyncAfter(deadline: .now() + Self.dispatchInterval(delay)) { [self] in flush() }
        }
    }

    /// Writes what is buffered (with `writing` held); `false` when the output stopped taking data before the end,
    /// in which case what is left is back at the front of the buffer.
    private func writeBuffered(waiting: Bool) -> Bool {
        let (bytes, dropped) = pending.withLock { pending -> ([UInt8], Int) in
            pending.scheduled = false
            let dropped = pending.dropped
            pending.dropped = 0
            defer { pending.bytes.removeAll(keepingCapacity: pending.bytes.capacity <= 4 * flushBytes) }
            return (pending.bytes, dropped)
        }
        var remainder = bytes[...]
        // The lines refused while the buffer was full came after everything in it.
        if dropped > 0 { remainder += Self.droppedNotice(dropped) }
        guard !write(&remainder, waiting: waiting) else { return true }
        pending.withLock { $0.bytes.insert(contentsOf: remainder, at: 0) }
        return false
    }

    /// Writes `bytes` from the front; `false` (with the rest left in `bytes`) when the output stopped taking data.
    /// Other errors (a closed output) end the write: what was taken is dropped.
    private func write(_ bytes: inout ArraySlice<UInt8>, waiting: Bool) -> Bool {
        let pollMilliseconds: Int32 = 100
        let maxStalls = max(1, Int(stallLimit / .milliseconds(Int64(pollMilliseconds))))
        var stalls = 0
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress!, $0.count) }
            if written > 0 {
                bytes = bytes.dropFirst(written)
                stalls = 0
                continue
            }
            if written < 0, errno == EINTR { continue }
            guard written < 0, errno == EAGAIN || errno == EWOULDBLOCK else { return true }
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

    private static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
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

import Dispatch
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
public final class LogOutput: Sendable {
    /// Standard output, flushed within 50 ms.
    public static let standardOutput = LogOutput(descriptor: STDOUT_FILENO)

    private struct Pending {
        var bytes: [UInt8] = []
        /// A flush is scheduled for what is buffered.
        var scheduled = false
    }

    private let descriptor: Int32
    private let pending = Mutex(Pending())
    /// Held while writing, so a later flush never overtakes an earlier one.
    private let writing = Mutex(())
    public let flushInterval: Duration
    public let flushBytes: Int

    public init(descriptor: Int32, flushInterval: Duration = .milliseconds(50), flushBytes: Int = 64 << 10) {
        self.descriptor = descriptor
        self.flushInterval = flushInterval
        self.flushBytes = flushBytes
        Self.registerExitFlush()
    }

    /// Buffers `line` (a whole line, newline included); writes at once when `urgent` or the buffer is full.
    public func write(_ line: String, urgent: Bool) {
        let (flushNow, schedule) = pending.withLock { pending -> (Bool, Bool) in
            pending.bytes.append(contentsOf: line.utf8)
            if urgent || pending.bytes.count >= flushBytes { return (true, false) }
            guard !pending.scheduled else { return (false, false) }
            pending.scheduled = true
            return (false, true)
        }
        if flushNow {
            flush()
        } else if schedule {
            let (seconds, attoseconds) = flushInterval.components
            let nanoseconds = Int(clamping: seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000)
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [self] in flush() }
        }
    }

    /// Writes everything buffered now.
    public func flush() {
        writing.withLock { _ in
            let bytes = pending.withLock { pending -> [UInt8] in
                pending.scheduled = false
                defer { pending.bytes.removeAll(keepingCapacity: pending.bytes.capacity <= 4 * flushBytes) }
                return pending.bytes
            }
            guard !bytes.isEmpty else { return }
            bytes.withUnsafeBytes { buffer in
                var offset = 0
                var stalls = 0
                while offset < buffer.count {
                    let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                    if written > 0 {
                        offset += written
                        stalls = 0
                        continue
                    }
                    if written < 0, errno == EINTR { continue }
                    // A non-blocking output that is full: wait until it takes more (a reader that stalls for
                    // seconds costs its lines, never the worker).
                    guard written < 0, errno == EAGAIN || errno == EWOULDBLOCK, stalls < 50 else { return }
                    stalls += 1
                    var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&ready, 1, 100)
                }
            }
        }
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

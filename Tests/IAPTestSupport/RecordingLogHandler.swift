import Logging
import Synchronization

/// A log handler that keeps every entry, so tests can wait for a log line and prove what logs never contain.
public struct RecordingLogHandler: LogHandler {
    public struct Entry: Sendable {
        public var level: Logger.Level
        public var message: String
        public var metadata: Logger.Metadata
        /// Level, message and metadata on one line.
        public var line: String { "\(level) \(message) \(metadata)" }
    }

    /// The entries of every logger made from one recorder.
    public final class Recorder: Sendable {
        private let entries = Mutex<[Entry]>([])
        public init() {}
        public var all: [Entry] { entries.withLock { $0 } }
        public func count(where predicate: (Entry) -> Bool) -> Int { all.filter(predicate).count }
        fileprivate func append(_ entry: Entry) { entries.withLock { $0.append(entry) } }

        /// A handler that records here (to wrap in another handler).
        public func handler() -> RecordingLogHandler { RecordingLogHandler(recorder: self) }

        /// A logger that records at every level.
        public func logger(label: String = "test") -> Logger {
            Logger(label: label) { _ in RecordingLogHandler(recorder: self) }
        }
    }

    private let recorder: Recorder
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    init(recorder: Recorder) { self.recorder = recorder }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        recorder.append(
            Entry(
                level: event.level, message: "\(event.message)",
                metadata: metadata.merging(event.metadata ?? [:]) { $1 }))
    }
}

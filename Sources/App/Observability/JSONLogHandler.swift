import Foundation
import Fulfilment
import Gamebase
import Ledger
import Logging
import Wire

#if canImport(Glibc)
    import Glibc
#endif

/// One JSON object per line on stdout: `ts` (UTC, milliseconds), `level`, `logger`, `msg`, the metadata sorted by
/// key, then `source`.
///
/// Written by hand rather than with `JSONSerialization` and a date format style: the worker logs one line per
/// purchase, and those two cost more CPU than the rest of a purchase's processing (measured with `perf`). Lines go
/// through ``LogOutput``, which writes many in one `write(2)` and flushes within 50 ms, at once for warnings and
/// errors, and at exit.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    private let label: String
    private let output: LogOutput

    public init(label: String, output: LogOutput = .standardOutput) {
        self.label = label
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        output.write(line(for: event), urgent: event.level >= .warning)
    }

    /// The JSON line for `event`, newline included.
    public func line(for event: LogEvent) -> String {
        var line = ""
        line.reserveCapacity(256)
        line += #"{"ts":""#
        line += RFC3339.string(Date())
        line += #"","level":""#
        line += event.level.rawValue
        line += #"","logger":"#
        JSONText.appendString(label, to: &line)
        line += #","msg":"#
        JSONText.appendString(event.message.description, to: &line)
        let merged: Logger.Metadata
        if let own = event.metadata, !own.isEmpty {
            merged = metadata.isEmpty ? own : metadata.merging(own) { $1 }
        } else {
            merged = metadata
        }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            line += ","
            JSONText.appendString(key, to: &line)
            line += ":"
            switch value {
            case .string(let value): JSONText.appendString(value, to: &line)
            default: JSONText.appendString(value.description, to: &line)
            }
        }
        if !event.source.isEmpty {
            line += #","source":"#
            JSONText.appendString(event.source, to: &line)
        }
        line += "}\n"
        return line
    }
}

import Foundation

/// Builds dead-letter records: the original key, value and headers, plus the provenance headers of DESIGN §2.
public struct DeadLetterFactory: Sendable {
    public var topic: String
    /// The worker's name for `iap-worker` (e.g. its client id or host).
    public var workerName: String

    public init(topic: String, workerName: String) {
        self.topic = topic
        self.workerName = workerName
    }

    public static let headerPrefix = "iap-"
    /// Set on a dead-letter record whose value had to be left out (see ``withoutValue(_:)``): the original size.
    public static let omittedValueHeader = "iap-value-omitted-bytes"

    /// - Parameter attempts: attempts made now; added to the attempts recorded on the original (a re-driven record).
    public func record(
        for input: PurchaseInput, reason: ConsumeFailureReason, error: String, attempts: Int, at date: Date
    ) -> OutboundRecord {
        // A re-driven record's provenance headers are the worker's own: replaced by the new ones. On a purchase
        // record they are its producer's data: kept as they are, and the worker's own follow them (readers take
        // the last header of a name).
        let original = input.provenanceTrusted ? input.headers.filter { !$0.name.hasPrefix(Self.headerPrefix) } : input.headers
        let source = input.originalSource ?? input.source
        let timestamp = input.originalTimestampMilliseconds ?? input.timestampMilliseconds
        let (total, overflow) = input.previousAttempts.addingReportingOverflow(max(0, attempts))
        let provenance: [(String, String)] = [
            ("iap-original-topic", source.topic),
            ("iap-original-partition", String(source.partition)),
            ("iap-original-offset", String(source.offset)),
            ("iap-original-timestamp", timestamp.map { String($0) } ?? ""),
            ("iap-reason", reason.rawValue),
            ("iap-error", String(error.split(whereSeparator: \.isNewline).joined(separator: " ").prefix(500))),
            ("iap-attempts", String(overflow ? Int.max : total)),
            ("iap-failed-at", RFC3339.string(date)),
            ("iap-worker", workerName),
        ]
        return OutboundRecord(
            topic: topic, key: input.key, value: input.value,
            headers: original + provenance.map { RecordHeader(name: $0.0, string: $0.1) })
    }

    /// The record with its value left out and the original size recorded: what is dead-lettered when the whole
    /// record is larger than the dead-letter topic accepts, so that the partition still moves on and the record's
    /// provenance (topic, partition, offset) tells where to find it.
    public func withoutValue(_ record: OutboundRecord) -> OutboundRecord {
        var trimmed = record
        trimmed.value = []
        if let key = record.key, key.count > 4_096 { trimmed.key = nil }
        // Headers a producer added may be what made it too large: only the worker's own are kept.
        trimmed.headers = record.headers.filter { $0.name.hasPrefix(Self.headerPrefix) }
        trimmed.headers.append(RecordHeader(name: Self.omittedValueHeader, string: String(record.value.count)))
        return trimmed
    }
}

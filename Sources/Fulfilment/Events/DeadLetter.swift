import Foundation
import Wire

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
    /// The provenance headers every dead-letter record carries (DESIGN §2), in the order they are written.
    public static let provenanceHeaders = [
        "iap-original-topic", "iap-original-partition", "iap-original-offset", "iap-original-timestamp", "iap-reason",
        "iap-error", "iap-attempts", "iap-failed-at", "iap-worker",
    ]

    /// - Parameter attempts: attempts made now; added to the attempts recorded on the original (a re-driven record).
    public func record(
        for input: PurchaseInput, reason: ConsumeFailureReason, error: String, attempts: Int, at date: Date
    ) -> OutboundRecord {
        // A re-driven record's provenance headers are the worker's own: replaced by the new ones. On a purchase
        // record they are its producer's data: kept as they are, and the worker's own follow them (readers take
        // the last header of a name).
        let original =
            input.provenanceTrusted ? input.headers.filter { !$0.name.hasPrefix(Self.headerPrefix) } : input.headers
        let source = input.originalSource ?? input.source
        let timestamp = input.originalTimestampMilliseconds ?? input.timestampMilliseconds
        let (total, overflow) = input.previousAttempts.addingReportingOverflow(max(0, attempts))
        let values = [
            source.topic, String(source.partition), String(source.offset), timestamp.map { String($0) } ?? "",
            reason.rawValue, String(error.split(whereSeparator: \.isNewline).joined(separator: " ").prefix(500)),
            String(overflow ? Int.max : total), RFC3339.string(date), workerName,
        ]
        var provenance = zip(Self.provenanceHeaders, values).map { RecordHeader(name: $0, string: $1) }
        // A producer's `iap-value-omitted-bytes` would otherwise be the last word on a record dead-lettered whole
        // (found by fuzzing): the worker's own says that nothing was left out.
        if original.contains(where: { $0.name == Self.omittedValueHeader }) {
            provenance.append(RecordHeader(name: Self.omittedValueHeader, string: "0"))
        }
        return OutboundRecord(topic: topic, key: input.key, value: input.value, headers: original + provenance)
    }

    /// The record with its value left out and the original size recorded: what is dead-lettered when the whole
    /// record is larger than the dead-letter topic accepts, so that the partition still moves on and the record's
    /// provenance (topic, partition, offset) tells where to find it.
    public func withoutValue(_ record: OutboundRecord) -> OutboundRecord {
        var trimmed = record
        trimmed.value = []
        if let key = record.key, key.count > 4_096 { trimmed.key = nil }
        // Headers a producer added may be what made it too large, its own `iap-*` ones included (found by fuzzing: a
        // large one kept here made the trimmed record too large again, and the partition stalled): only the worker's
        // own are kept, which are the last of each provenance name (``record(for:reason:error:attempts:at:)`` writes
        // them after the original headers).
        trimmed.headers = Self.provenanceHeaders.compactMap { name in record.headers.last { $0.name == name } }
        trimmed.headers.append(RecordHeader(name: Self.omittedValueHeader, string: String(record.value.count)))
        return trimmed
    }
}

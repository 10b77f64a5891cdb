import Foundation
import Ledger

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

    /// - Parameter attempts: attempts made now; added to the attempts recorded on the original (a re-driven record).
    public func record(
        for input: PurchaseInput, reason: ConsumeFailureReason, error: String, attempts: Int, at date: Date
    ) -> OutboundRecord {
        let original = input.headers.filter { !$0.name.hasPrefix(Self.headerPrefix) }
        let source = input.originalSource ?? input.source
        let provenance: [(String, String)] = [
            ("iap-original-topic", source.topic),
            ("iap-original-partition", String(source.partition)),
            ("iap-original-offset", String(source.offset)),
            ("iap-original-timestamp", (input.originalTimestamp ?? input.timestamp).map { String($0.epochMillisecondsValue) } ?? ""),
            ("iap-reason", reason.rawValue),
            ("iap-error", String(error.split(whereSeparator: \.isNewline).joined(separator: " ").prefix(500))),
            ("iap-attempts", String(input.previousAttempts + attempts)),
            ("iap-failed-at", RFC3339.string(date)),
            ("iap-worker", workerName),
        ]
        return OutboundRecord(
            topic: topic, key: input.key, value: input.value,
            headers: original + provenance.map { RecordHeader(name: $0.0, string: $0.1) })
    }
}

extension Date {
    var epochMillisecondsValue: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }
}

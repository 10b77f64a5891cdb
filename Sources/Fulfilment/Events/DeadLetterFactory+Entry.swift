import Foundation
import Wire

extension DeadLetterFactory {
    /// The ledger's row for a dead-letter record built by ``record(for:reason:error:attempts:at:)``: who and what it
    /// was (when the value can be read), why, and where it went. Never the value or the token: their size and a hash.
    /// Identifiers a malformed record carries are kept only when a ledger can store them (no NUL, at most
    /// ``maxIdentifierBytes``): they are the producer's, not Gamebase's.
    public func entry(
        for record: OutboundRecord, input: PurchaseInput, maxMessageBytes: Int, location: RecordLocation?,
        valueOmitted: Bool
    ) -> DeadLetterEntry {
        var paymentSeq: String?
        var userId: String?
        var tokenHash: String?
        switch PurchaseMessage.parse(input.value, maxBytes: maxMessageBytes) {
        case .success(let message):
            (paymentSeq, userId, tokenHash) = (message.paymentSeq, message.userId, message.tokenHash)
        case .failure(let malformed):
            (paymentSeq, userId) = (malformed.paymentSeq, malformed.userId)
        }
        func header(_ name: String) -> String? { record.headers.last { $0.name == name }?.stringValue }
        let attempts = header("iap-attempts").flatMap { Int($0) } ?? 0
        return DeadLetterEntry(
            paymentSeq: Self.storable(paymentSeq), userId: Self.storable(userId), tokenHash: tokenHash,
            reason: header("iap-reason") ?? "unknown",
            error: Self.storable(header("iap-error"), clippedTo: 500) ?? "",
            attempts: attempts, deadLetterTopic: location?.topic ?? record.topic,
            deadLetterPartition: location?.partition, deadLetterOffset: location?.offset,
            original: input.originalSource ?? input.source,
            originalTimestampMilliseconds: input.originalTimestampMilliseconds ?? input.timestampMilliseconds,
            failedAt: header("iap-failed-at").flatMap(RFC3339.date) ?? Date(),
            valueBytes: record.value.count, valueOmitted: valueOmitted)
    }

    /// The longest identifier of a malformed record the ledger keeps.
    public static let maxIdentifierBytes = 512

    static func storable(_ text: String?, clippedTo limit: Int? = nil) -> String? {
        guard var text, !text.isEmpty else { return nil }
        if let limit {
            text = String(decoding: text.utf8.prefix(limit), as: UTF8.self)
            return text.replacingOccurrences(of: "\u{0}", with: " ")
        }
        guard text.utf8.count <= maxIdentifierBytes, !text.utf8.contains(0) else { return nil }
        return text
    }
}

import Foundation
import Wire

/// A record to run through the flow: a purchase message as consumed, or a dead-letter record re-driven.
public struct PurchaseInput: Sendable, Hashable {
    public var key: [UInt8]?
    public var value: [UInt8]
    public var headers: [RecordHeader]
    /// Where this record was read.
    public var source: MessageSource
    /// The record's Kafka timestamp, milliseconds since the epoch, exactly as the broker gave it.
    public var timestampMilliseconds: Int64?
    /// Whether the `iap-*` provenance headers are the worker's own: true only for records read from the
    /// dead-letter topic (by `reprocess`). On a purchase record they are whatever its producer wrote: kept as they
    /// are, never believed.
    public var provenanceTrusted: Bool
    /// `.reconciliation` for a payment the reconciler found through List Consumables: no message exists, so
    /// `source` names no record and is not stored with the grant.
    public var origin: PurchaseOrigin

    public init(
        key: [UInt8]?, value: [UInt8], headers: [RecordHeader] = [], source: MessageSource,
        timestampMilliseconds: Int64?, provenanceTrusted: Bool = false, origin: PurchaseOrigin = .message
    ) {
        self.key = key
        self.value = value
        self.headers = headers
        self.source = source
        self.timestampMilliseconds = timestampMilliseconds
        self.provenanceTrusted = provenanceTrusted
        self.origin = origin
    }

    public init(
        key: [UInt8]?, value: [UInt8], headers: [RecordHeader] = [], source: MessageSource, timestamp: Date? = nil,
        provenanceTrusted: Bool = false, origin: PurchaseOrigin = .message
    ) {
        self.init(
            key: key, value: value, headers: headers, source: source,
            timestampMilliseconds: timestamp.map(\.clampedEpochMilliseconds), provenanceTrusted: provenanceTrusted,
            origin: origin)
    }

    /// Where the grant or rejection of this input came from, as the ledger keeps it: the record read, or nothing
    /// for a payment found by reconciliation.
    public var recordedSource: MessageSource? { origin == .message ? source : nil }

    /// The record's timestamp as a date (milliseconds beyond what a date holds are clamped).
    public var timestamp: Date? {
        timestampMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) }
    }

    /// The most attempts a provenance header is believed to count; larger values are read as this.
    public static let maxRecordedAttempts = 1_000_000

    private func trustedHeader(_ name: String) -> String? {
        guard provenanceTrusted else { return nil }
        return headers.last { $0.name == name }?.stringValue
    }

    /// Attempts recorded by earlier dead-lettering (`iap-attempts`), 0 for a fresh message.
    public var previousAttempts: Int {
        guard let text = trustedHeader("iap-attempts"), let value = Int64(text), value > 0 else { return 0 }
        return Int(min(value, Int64(Self.maxRecordedAttempts)))
    }

    /// For a re-driven dead-letter record: where the purchase message was first read.
    public var originalSource: MessageSource? {
        guard let topic = trustedHeader("iap-original-topic"), !topic.isEmpty,
            let partition = trustedHeader("iap-original-partition").flatMap({ Int32($0) }), partition >= 0,
            let offset = trustedHeader("iap-original-offset").flatMap({ Int64($0) }), offset >= 0
        else { return nil }
        return MessageSource(topic: topic, partition: partition, offset: offset)
    }

    /// For a re-driven dead-letter record: the original message's timestamp, milliseconds since the epoch.
    public var originalTimestampMilliseconds: Int64? {
        trustedHeader("iap-original-timestamp").flatMap { Int64($0) }
    }

    /// The reason a dead-letter record was dead-lettered (`iap-reason`).
    public var deadLetterReason: String? { trustedHeader("iap-reason") }
}

extension Date {
    /// Milliseconds since the epoch, rounded, clamped to `Int64` (a date from outside can be anything).
    public var clampedEpochMilliseconds: Int64 {
        let milliseconds = (timeIntervalSince1970 * 1000).rounded()
        guard milliseconds.isFinite else { return milliseconds > 0 ? .max : .min }
        return Int64(exactly: milliseconds) ?? (milliseconds > 0 ? .max : .min)
    }
}

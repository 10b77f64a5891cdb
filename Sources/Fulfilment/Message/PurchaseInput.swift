import Foundation
import Ledger

/// A record to run through the flow: a purchase message as consumed, or a dead-letter record re-driven.
public struct PurchaseInput: Sendable, Hashable {
    public var key: [UInt8]?
    public var value: [UInt8]
    public var headers: [RecordHeader]
    /// Where this record was read.
    public var source: MessageSource
    public var timestamp: Date?

    public init(key: [UInt8]?, value: [UInt8], headers: [RecordHeader] = [], source: MessageSource, timestamp: Date? = nil) {
        self.key = key
        self.value = value
        self.headers = headers
        self.source = source
        self.timestamp = timestamp
    }

    private func header(_ name: String) -> String? { headers.last { $0.name == name }?.stringValue }

    /// Attempts recorded by earlier dead-lettering (`iap-attempts`), 0 for a fresh message.
    public var previousAttempts: Int { header("iap-attempts").flatMap(Int.init) ?? 0 }

    /// For a re-driven dead-letter record: where the purchase message was first read.
    public var originalSource: MessageSource? {
        guard let topic = header("iap-original-topic"), let partition = header("iap-original-partition").flatMap(Int32.init),
            let offset = header("iap-original-offset").flatMap(Int64.init)
        else { return nil }
        return MessageSource(topic: topic, partition: partition, offset: offset)
    }

    public var originalTimestamp: Date? {
        header("iap-original-timestamp").flatMap(Int64.init).map { Date(timeIntervalSince1970: Double($0) / 1000) }
    }

    /// The reason a dead-letter record was dead-lettered (`iap-reason`).
    public var deadLetterReason: String? { header("iap-reason") }
}

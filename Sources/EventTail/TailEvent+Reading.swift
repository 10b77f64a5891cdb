import Fulfilment
import Gamebase
import Kafka
import Wire

extension TailEvent {
    /// Reads a record of one of the worker's topics; `nil` for a record of another topic.
    ///
    /// Events (item-granted, consume-failed) are CloudEvents JSON: only `data`'s few fields shown are read, with the
    /// project's strict JSON reader. A dead letter's value is the original purchase message: only its paymentSeq and
    /// userId are taken, through the flow's own reader (``PurchaseMessage/parse(_:maxBytes:)``, which keeps them only
    /// when they are short and free of control characters); the token is never looked at beyond that. Anything that
    /// cannot be read leaves its fields `nil`.
    public init?(_ message: KafkaMessage, topics: TailTopics) {
        guard let kind = topics.kind(of: message.topic) else { return nil }
        self.init(
            kind: kind, topic: message.topic, partition: message.partition, offset: message.offset,
            timestampMilliseconds: message.timestampMilliseconds)
        switch kind {
        case .itemGranted:
            let data = Self.eventData(message.value, fields: ["userId", "paymentSeq", "gamebaseProductId", "source"])
            paymentSeq = data["paymentSeq"]
            userId = data["userId"]
            product = data["gamebaseProductId"]
            // The schema: an event without `source` came from a message (written before reconciliation existed).
            grantSource = data["source"] ?? (data.isEmpty ? nil : PurchaseOrigin.message.rawValue)
        case .consumeFailed:
            let data = Self.eventData(message.value, fields: ["userId", "paymentSeq", "reason"])
            paymentSeq = data["paymentSeq"]
            userId = data["userId"]
            reason = data["reason"]
        case .itemRevoked, .refundReversed:
            let data = Self.eventData(
                message.value, fields: ["userId", "paymentSeq", "gamebaseProductId", "reason", "source"])
            if Self.eventType(message.value) == EventFactory.refundReversedType { self.kind = .refundReversed }
            paymentSeq = data["paymentSeq"]
            userId = data["userId"]
            product = data["gamebaseProductId"]
            reason = data["reason"]
            grantSource = data["source"]
        case .deadLetter:
            switch PurchaseMessage.parse(message.value, maxBytes: Self.largestReadValue) {
            case .success(let purchase):
                paymentSeq = PurchaseMessage.plainIdentifier(purchase.paymentSeq)
                userId = PurchaseMessage.plainIdentifier(purchase.userId)
            case .failure(let malformed):
                paymentSeq = malformed.paymentSeq
                userId = malformed.userId
            }
            // The worker's own provenance headers follow any a producer sent: the last of each name is its own.
            reason = message.headers.string(named: "iap-reason")
            if let topic = message.headers.string(named: "iap-original-topic"), !topic.isEmpty,
                let partition = message.headers.string(named: "iap-original-partition").flatMap({ Int32($0) }),
                let offset = message.headers.string(named: "iap-original-offset").flatMap({ Int64($0) })
            {
                origin = Origin(topic: topic, partition: partition, offset: offset)
            }
        }
    }

    /// Dead-letter values larger than this are not parsed (a purchase message is at most `worker.max_message_bytes`,
    /// 10 MB at most; a larger one was dead-lettered as malformed and has nothing to show).
    static let largestReadValue = 10_000_000

    /// Nesting deeper than this is not read (an event is three levels deep).
    static let maxDepth = 16

    /// The CloudEvent's top-level `type`, when it is a string.
    static func eventType(_ value: [UInt8]) -> String? {
        guard String(validating: value, as: UTF8.self) != nil else { return nil }
        var type: String?
        var reader = JSONReader(value, maxDepth: maxDepth)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                if key == "type" { type = try reader.readStringOrSkip() } else { try reader.skipValue() }
            }
        } catch {
            return nil
        }
        return type
    }

    /// The string members named in `fields` of the CloudEvent's `data` object; empty when the value is not valid UTF-8,
    /// not JSON, not an object, or has no `data` object. A member given twice counts once, the last; a member that is
    /// not a string is left out.
    static func eventData(_ value: [UInt8], fields: Set<String>) -> [String: String] {
        guard !value.isEmpty, String(validating: value, as: UTF8.self) != nil else { return [:] }
        var found: [String: String] = [:]
        var reader = JSONReader(value, maxDepth: maxDepth)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                guard key == "data" else { return try reader.skipValue() }
                if try reader.readNull() {
                    found = [:]
                    return
                }
                var data: [String: String] = [:]
                try reader.readObject { reader, member throws(JSONReader.Failure) in
                    guard fields.contains(member) else { return try reader.skipValue() }
                    if try reader.readNull() {
                        data[member] = nil
                    } else {
                        data[member] = try reader.readStringOrSkip()
                    }
                }
                found = data
            }
            try reader.finish()
        } catch {
            return [:]
        }
        return found
    }
}

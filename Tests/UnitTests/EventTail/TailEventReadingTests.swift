import EventTail
import Foundation
import Kafka
import Testing

/// Records of the worker's topics read into tail events: the few fields shown, and nothing else, whatever the record.
@Suite struct TailEventReadingTests {
    static let topics = TailTopics(
        itemGranted: "iap.item-granted", consumeFailed: "iap.consume-failed", deadLetter: "purchase.completed.dlq")

    static func record(_ topic: String, _ value: String, headers: [(String, String)] = []) -> KafkaMessage {
        record(topic, Array(value.utf8), headers: headers)
    }

    static func record(_ topic: String, _ value: [UInt8], headers: [(String, String)] = []) -> KafkaMessage {
        KafkaMessage(
            topic: topic, partition: 2, offset: 41, timestampMilliseconds: 1_767_312_245_678, key: Array("k".utf8),
            value: value,
            headers: headers.map { KafkaHeader(name: $0.0, string: $0.1) })
    }

    static let granted = #"""
        {"specversion":"1.0","id":"p1:item-granted","source":"/iap-worker/g","type":"gamebase.iap.item.granted.v1",\#
        "subject":"p1","time":"2026-01-02T00:04:05.000Z","datacontenttype":"application/json","data":{"userId":"u1",\#
        "paymentSeq":"p1","gamebaseProductId":"gems_500","productSeq":7,"price":4.99,"isTestPurchase":false,\#
        "grantedAt":"2026-01-02T00:04:05.000Z","source":"reconciliation"}}
        """#

    @Test func itemGrantedShowsPaymentUserProductAndSource() throws {
        let event = try #require(TailEvent(Self.record(Self.topics.itemGranted, Self.granted), topics: Self.topics))
        #expect(event.kind == .itemGranted)
        #expect(event.paymentSeq == "p1")
        #expect(event.userId == "u1")
        #expect(event.product == "gems_500")
        #expect(event.source == "reconciliation")
        #expect(
            TailLine.text(event)
                == "2026-01-02T00:04:05.678Z item-granted   paymentSeq=p1 userId=u1 product=gems_500 source=reconciliation"
        )
    }

    @Test func anItemGrantedEventWithoutSourceCameFromAMessage() throws {
        let value = #"{"data":{"userId":"u1","paymentSeq":"p1","gamebaseProductId":"g"}}"#
        let event = try #require(TailEvent(Self.record(Self.topics.itemGranted, value), topics: Self.topics))
        #expect(event.source == "message")
    }

    @Test func revocationsAndReversalsShowProductReasonAndSourceToldApartByTheirType() throws {
        let revoked = #"""
            {"specversion":"1.0","id":"p1:item-revoked","type":"gamebase.iap.item.revoked.v1","subject":"p1",\#
            "data":{"userId":"u1","paymentSeq":"p1","gamebaseProductId":"gems_500","store":"google",\#
            "reason":"partial_refund","revokedAt":"2026-01-01T00:00:00.000Z","notificationId":"n","source":"google-rtdn"}}
            """#
        let event = try #require(TailEvent(Self.record(Self.topics.itemRevoked, revoked), topics: Self.topics))
        #expect(event.kind == .itemRevoked)
        #expect(
            TailLine.text(event)
                == "2026-01-02T00:04:05.678Z item-revoked   paymentSeq=p1 userId=u1 product=gems_500 reason=partial_refund source=google-rtdn"
        )
        let reversed = revoked.replacingOccurrences(of: "item.revoked.v1", with: "refund.reversed.v1")
        let reversal = try #require(TailEvent(Self.record(Self.topics.itemRevoked, reversed), topics: Self.topics))
        #expect(reversal.kind == .refundReversed)
        #expect(TailLine.text(reversal).contains(" refund-reversed paymentSeq=p1 "))
        // A record that says nothing readable is still an item-revoked line, with the rest unknown.
        let damaged = try #require(TailEvent(Self.record(Self.topics.itemRevoked, [0xFF, 0x00]), topics: Self.topics))
        #expect(damaged.kind == .itemRevoked && damaged.paymentSeq == nil)
    }

    @Test func consumeFailedShowsTheReason() throws {
        let value =
            #"{"id":"x","data":{"userId":"thief","paymentSeq":"p1","reason":"user_mismatch","retryable":false,"attempts":1,"detail":"d"}}"#
        let event = try #require(TailEvent(Self.record(Self.topics.consumeFailed, value), topics: Self.topics))
        #expect(
            TailLine.text(event)
                == "2026-01-02T00:04:05.678Z consume-failed paymentSeq=p1 userId=thief reason=user_mismatch")
    }

    @Test func aDeadLetterShowsSeqUserReasonAndOriginButNeverTheToken() throws {
        let value = #"{"userId":"u9","paymentSeq":"p9","purchaseToken":"SECRET-TOKEN","storeCode":"GG"}"#
        let headers = [
            ("iap-reason", "forged_by_producer"), ("iap-original-topic", "forged"),
            ("iap-original-topic", "purchase.completed"), ("iap-original-partition", "3"),
            ("iap-original-offset", "17"),
            ("iap-reason", "gamebase_unavailable"), ("iap-error", "SECRET-TOKEN in an error"),
        ]
        let event = try #require(
            TailEvent(Self.record(Self.topics.deadLetter, value, headers: headers), topics: Self.topics))
        let text = TailLine.text(event)
        #expect(
            text
                == "2026-01-02T00:04:05.678Z dead-letter    paymentSeq=p9 userId=u9 reason=gamebase_unavailable source=purchase.completed[3]@17"
        )
        let json = TailLine.json(event)
        #expect(!text.contains("SECRET") && !json.contains("SECRET"))
    }

    @Test func aMalformedDeadLetterShowsWhatTheReaderCouldRead() throws {
        let value = #"{"userId":"u9","paymentSeq":"p9","purchaseToken":""}"#
        let event = try #require(
            TailEvent(
                Self.record(Self.topics.deadLetter, value, headers: [("iap-reason", "malformed_message")]),
                topics: Self.topics))
        #expect(event.paymentSeq == "p9" && event.userId == "u9" && event.reason == "malformed_message")
        #expect(event.source == nil)
    }

    @Test func aRecordOfAnotherTopicIsNoEvent() {
        #expect(TailEvent(Self.record("purchase.completed", Self.granted), topics: Self.topics) == nil)
    }

    static let hostileValues: [[UInt8]] = [
        [],
        Array("not json".utf8),
        [0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D],
        Array(#"{"data":"a string"}"#.utf8),
        Array(#"{"data":null}"#.utf8),
        Array(#"{"data":{"userId":5,"paymentSeq":["p"],"reason":{"a":1}}}"#.utf8),
        Array(#"[{"data":{"userId":"u"}}]"#.utf8),
        Array(#"{"data":{"userId":"u"}} trailing"#.utf8),
        Array((String(repeating: "[", count: 50_000) + String(repeating: "]", count: 50_000)).utf8),
        Array(#"{"data":{"userId":"u""#.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 1_000_000),
        [UInt8](repeating: UInt8(ascii: "{"), count: 1_000_000),
    ]

    @Test(arguments: hostileValues.indices)
    func aHostileValueMakesALineOfDashes(index: Int) throws {
        for topic in Self.topics.all {
            let event = try #require(TailEvent(Self.record(topic, Self.hostileValues[index]), topics: Self.topics))
            #expect(event.paymentSeq == nil && event.userId == nil && event.product == nil)
            let line = TailLine.text(event)
            #expect(line.contains("paymentSeq=- userId=-"))
            #expect(!line.contains("\n"))
            let parsed = try JSONSerialization.jsonObject(with: Data(TailLine.json(event).utf8)) as? [String: Any]
            #expect(parsed?["userId"] is NSNull)
        }
    }

    @Test func hostileDeadLetterHeadersAreCheckedAndEscaped() throws {
        let headers = [
            ("iap-original-topic", "t\n2026-01-01T00:00:00.000Z item-granted   paymentSeq=FAKE"),
            ("iap-original-partition", "9223372036854775807"), ("iap-original-offset", "1"),
            ("iap-reason", "\u{1B}[2Jwiped"),
        ]
        let event = try #require(
            TailEvent(Self.record(Self.topics.deadLetter, "x", headers: headers), topics: Self.topics))
        // A partition that does not fit an Int32: no origin.
        #expect(event.origin == nil)
        let line = TailLine.text(event)
        #expect(line.contains(#"reason=\u{1B}[2Jwiped"#))
        #expect(!line.unicodeScalars.contains { $0.value < 0x20 })
    }
}

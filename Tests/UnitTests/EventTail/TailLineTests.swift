import EventTail
import Foundation
import Testing

/// What `events tail` prints: one line per event, whatever the fields hold; filters and arguments.
@Suite struct TailLineTests {
    static func event(userId: String?, kind: TailEvent.Kind = .consumeFailed, reason: String? = "user_mismatch")
        -> TailEvent
    {
        TailEvent(
            kind: kind, topic: "iap.consume-failed", partition: 0, offset: 7, timestampMilliseconds: 0,
            paymentSeq: "p1",
            userId: userId, reason: reason)
    }

    static let hostileUserIds: [(String, String)] = [
        (
            "u1\n1970-01-01T00:00:00.000Z item-granted   paymentSeq=FORGED",
            #"u1\u{A}1970-01-01T00:00:00.000Z\u{20}item-granted\u{20}\u{20}\u{20}paymentSeq=FORGED"#
        ),
        ("u\r\u{1B}[2K\u{1B}]0;title\u{7}", #"u\u{D}\u{1B}[2K\u{1B}]0;title\u{7}"#),
        ("u\u{202E}desrever\u{2066}", #"u\u{202E}desrever\u{2066}"#),
        ("u\u{85}\u{2028}\u{9B}31m", #"u\u{85}\u{2028}\u{9B}31m"#),
        (#"u\u{A}"#, #"u\\u{A}"#),
        ("u\u{0}\u{7F}", #"u\u{0}\u{7F}"#),
        ("ü-ユーザー-🙂", "ü-ユーザー-🙂"),
    ]

    @Test(arguments: hostileUserIds.indices)
    func controlCharactersAreEscapedSoNoLineCanBeForged(index: Int) throws {
        let (userId, shown) = Self.hostileUserIds[index]
        let line = TailLine.text(Self.event(userId: userId))
        #expect(line == "1970-01-01T00:00:00.000Z consume-failed paymentSeq=p1 userId=\(shown) reason=user_mismatch")
        #expect(
            !line.unicodeScalars.contains {
                $0.properties.generalCategory == .control || $0.properties.generalCategory == .format
            })

        let json = TailLine.json(Self.event(userId: userId))
        #expect(
            !json.unicodeScalars.contains {
                $0.properties.generalCategory == .control || $0.properties.generalCategory == .format
            })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        // JSON keeps the value exactly (escaped in the text, not changed).
        #expect(object["userId"] as? String == userId)
    }

    @Test func longFieldsAreClipped() {
        let line = TailLine.text(Self.event(userId: String(repeating: "u", count: 10_000)))
        #expect(line.contains("userId=" + String(repeating: "u", count: TailLine.fieldLimit) + "… reason="))
    }

    @Test func unknownFieldsAreDashesInTextAndNullInJSON() throws {
        let event = TailEvent(kind: .deadLetter, topic: "dlq", partition: 1, offset: 2)
        #expect(TailLine.text(event) == "- dead-letter    paymentSeq=- userId=- reason=- source=-")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(TailLine.json(event).utf8)) as? [String: Any])
        #expect(
            Set(object.keys) == [
                "time", "type", "paymentSeq", "userId", "product", "reason", "source", "originalTopic",
                "originalPartition",
                "originalOffset", "topic", "partition", "offset",
            ])
        #expect(object["time"] is NSNull && object["userId"] is NSNull && object["originalOffset"] is NSNull)
        #expect(object["type"] as? String == "dead-letter" && object["offset"] as? Int == 2)
    }

    @Test func aDeadLetterInJSONCarriesItsOrigin() throws {
        var event = TailEvent(
            kind: .deadLetter, topic: "dlq", partition: 1, offset: 2, timestampMilliseconds: 1_000,
            reason: "malformed_message")
        event.origin = .init(topic: "purchase.completed", partition: 3, offset: 17)
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(TailLine.json(event).utf8)) as? [String: Any])
        #expect(object["time"] as? String == "1970-01-01T00:00:01.000Z")
        #expect(object["source"] as? String == "purchase.completed[3]@17")
        #expect(object["originalTopic"] as? String == "purchase.completed")
        #expect(object["originalPartition"] as? Int == 3 && object["originalOffset"] as? Int == 17)
    }

    @Test func filtersMatchExactlyAndTogether() throws {
        let granted = TailEvent(
            kind: .itemGranted, topic: "g", partition: 0, offset: 0, paymentSeq: "p1", userId: "u1", product: "x")
        let failed = Self.event(userId: "u1")
        #expect(TailFilter().matches(granted))
        #expect(TailFilter(userId: "u1").matches(granted) && !TailFilter(userId: "u").matches(granted))
        #expect(TailFilter(paymentSeq: "p1").matches(failed) && !TailFilter(paymentSeq: "P1").matches(failed))
        #expect(
            TailFilter(reason: "user_mismatch").matches(failed) && !TailFilter(reason: "user_mismatch").matches(granted)
        )
        #expect(TailFilter(kinds: [.consumeFailed, .deadLetter]).matches(failed))
        #expect(!TailFilter(kinds: [.deadLetter]).matches(failed))
        #expect(!TailFilter(kinds: [.consumeFailed], userId: "u2").matches(failed))
        #expect(!TailFilter(userId: "u1").matches(Self.event(userId: nil)))
    }

    @Test func typesAreRepeatableOrCommaLists() throws {
        #expect(try TailFilter.kinds([]) == [])
        #expect(try TailFilter.kinds(["item-granted"]) == [.itemGranted])
        #expect(
            try TailFilter.kinds(["consume-failed,dead-letter", "item-granted", "item-revoked,refund-reversed"])
                == Set(TailEvent.Kind.allCases))
        #expect(throws: TailArgumentError.self) { try TailFilter.kinds(["granted"]) }
        #expect(throws: TailArgumentError.self) { try TailFilter.kinds(["item-granted,"]) }
    }

    @Test(arguments: [("30s", 30_000), ("10m", 600_000), ("2h", 7_200_000), ("1d", 86_400_000)] as [(String, Int64)])
    func sinceDurations(text: String, milliseconds: Int64) throws {
        #expect(try TailDuration.milliseconds(text) == milliseconds)
    }

    @Test(arguments: ["", "10", "m", "0m", "-5m", "1.5h", "10 m", "10M", "1w", "99999999999999999999d", "4000d"])
    func badSinceDurationsAreRefused(text: String) {
        #expect(throws: TailArgumentError.self) { try TailDuration.milliseconds(text) }
    }
}

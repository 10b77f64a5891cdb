import Foundation
import Fulfilment
import Testing

/// The events are written by hand for speed; their `Codable` form is the reference they must match.
@Suite("Event encoding")
struct EventEncodingTests {
    /// The CloudEvents envelope.
    struct Envelope<Payload: Codable>: Codable {
        var specversion: String
        var id: String
        var source: String
        var type: String
        var subject: String?
        var time: String
        var datacontenttype: String
        var data: Payload
    }

    let factory = EventFactory(groupID: "g/1", itemGrantedTopic: "granted", consumeFailedTopic: "failed")
    let awkward =
        "quote \" backslash \\ slash / newline \n tab \t carriage return \r control \u{1} \u{1f} delete \u{7f} accents é 漢字 emoji 🎮 combining e\u{301}\""

    /// Whether the event and what `JSONEncoder` writes for its decoded form are the same JSON value: no member
    /// missing, added or of another type.
    func matchesCodableForm<Payload: Codable>(_ payload: [UInt8], _: Payload.Type) throws -> Bool {
        let decoded = try JSONDecoder().decode(Envelope<Payload>.self, from: Data(payload))
        let reference = try JSONEncoder().encode(decoded)
        let written = try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? NSDictionary)
        return written == (try JSONSerialization.jsonObject(with: reference) as? NSDictionary)
    }

    @Test func anItemGrantedEventDecodesToExactlyWhatWasGranted() throws {
        let grant = GrantRecord(
            paymentSeq: "2024051310001234", userId: awkward, gamebaseProductId: "gems_500",
            purchaseToken: "secret-token",
            productSeq: 1001, marketId: "GG", productType: "CONSUMABLE", price: "1234.5678", currency: "KRW",
            paymentId: "GPA.1", isTestPurchase: true, purchaseTime: "2026-11-22T10:20:30+09:00",
            payload: "{\"a\":[1,2]}",
            grantedAt: Date(timeIntervalSince1970: 1_700_000_000.123))
        let event = factory.itemGranted(grant)
        let decoded = try JSONDecoder().decode(Envelope<ItemGrantedData>.self, from: Data(event.payload))

        #expect(decoded.specversion == "1.0")
        #expect(decoded.id == "2024051310001234:item-granted")
        #expect(decoded.source == "/iap-worker/g/1")
        #expect(decoded.type == EventFactory.itemGrantedType)
        #expect(decoded.subject == "2024051310001234")
        #expect(decoded.datacontenttype == "application/json")
        #expect(decoded.data.userId == awkward)
        #expect(decoded.data.productSeq == 1001)
        #expect(decoded.data.price == Decimal(string: "1234.5678"))
        #expect(decoded.data.payload == "{\"a\":[1,2]}")
        #expect(decoded.data.isTestPurchase)
        #expect(decoded.data.grantedAt == decoded.time)
        #expect(!String(decoding: event.payload, as: UTF8.self).contains("secret-token"))
        #expect(try matchesCodableForm(event.payload, ItemGrantedData.self))
    }

    @Test func anItemGrantedEventWrittenBeforeSourceExistedDecodesAsFromAMessage() throws {
        let old = Data(
            (#"{"userId":"u","paymentSeq":"7","gamebaseProductId":"p","isTestPurchase":false,"#
                + #""grantedAt":"t","price":1.5}"#).utf8)
        let decoded = try JSONDecoder().decode(ItemGrantedData.self, from: old)
        #expect(decoded.source == "message")
        #expect(decoded.price == Decimal(string: "1.5") && decoded.productSeq == nil)
        let reconciled = try JSONDecoder().decode(
            ItemGrantedData.self,
            from: Data(
                (#"{"userId":"u","paymentSeq":"8","gamebaseProductId":"p","isTestPurchase":true,"grantedAt":"t","#
                    + #""source":"reconciliation"}"#).utf8))
        #expect(reconciled.source == "reconciliation" && reconciled.isTestPurchase)
    }

    @Test func absentOptionalFieldsAreLeftOutNotWrittenAsNull() throws {
        let grant = GrantRecord(
            paymentSeq: "7", userId: "u", gamebaseProductId: "p", purchaseToken: "t",
            grantedAt: Date(timeIntervalSince1970: 0))
        let payload = factory.itemGranted(grant).payload
        let object = try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
        let data = try #require(object["data"] as? [String: Any])
        #expect(
            Set(data.keys) == ["userId", "paymentSeq", "gamebaseProductId", "isTestPurchase", "grantedAt", "source"])
        #expect(data["source"] as? String == "message", "always written: a grant is from a message unless said")
        #expect(!String(decoding: payload, as: UTF8.self).contains("null"))
        #expect(try matchesCodableForm(payload, ItemGrantedData.self))
    }

    @Test func aConsumeFailedEventDecodesToItsReasonAndDetail() throws {
        let event = factory.consumeFailed(
            id: "9:consume-failed:abc", userId: nil, paymentSeq: "9", reason: .userMismatch, resultCode: -4_000_102,
            resultMessage: awkward, attempts: 3, detail: awkward, key: Array("k".utf8),
            at: Date(timeIntervalSince1970: 5))
        let decoded = try JSONDecoder().decode(Envelope<ConsumeFailedData>.self, from: Data(event.payload))
        #expect(decoded.type == EventFactory.consumeFailedType)
        #expect(decoded.data.userId == nil)
        #expect(decoded.data.reason == "user_mismatch")
        #expect(decoded.data.retryable == false)
        #expect(decoded.data.resultCode == -4_000_102)
        #expect(decoded.data.resultMessage == awkward)
        #expect(decoded.data.attempts == 3)
        #expect(decoded.data.detail == awkward)
        #expect(event.key == Array("k".utf8))
        #expect(try matchesCodableForm(event.payload, ConsumeFailedData.self))
    }
}

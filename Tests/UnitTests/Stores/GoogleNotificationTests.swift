import Foundation
import Fulfilment
import Stores
import Testing

/// Google Play's voided-purchase notifications, in each form a Kafka record carries them, and every way one can be
/// wrong: a refund is believed only from a notification read whole; anything else is refused with why, never a crash.
@Suite("Google's real-time developer notifications")
struct GoogleNotificationTests {
    static let token = "opaque-token-of-the-purchase.AO-J1Oy"
    static let eventTime: Int64 = 1_764_000_000_123

    static func voided(
        orderId: String = "GPA.3371-1234-5678-90123", packageName: String = "com.studio.game",
        eventTime: String = "\"1764000000123\"", refundType: String = "1", token: String = token
    ) -> String {
        """
        {"version":"1.0","packageName":"\(packageName)","eventTimeMillis":\(eventTime),
         "voidedPurchaseNotification":{"purchaseToken":"\(token)","orderId":"\(orderId)","productType":2,
         "refundType":\(refundType)}}
        """
    }

    static func parse(
        _ text: String, packageName: String = "com.studio.game"
    ) -> Result<StoreNotification, StoreNotificationError> {
        GoogleNotification.parse(Array(text.utf8), packageName: packageName)
    }

    static func refused(_ text: String, packageName: String = "com.studio.game") -> StoreNotificationError? {
        if case .failure(let error) = parse(text, packageName: packageName) { return error }
        return nil
    }

    @Test func aVoidedPurchaseIsARefundOfItsOrderWithTheTokenOnlyAsItsHash() throws {
        let read = try Self.parse(Self.voided(), packageName: "com.studio.game").get()
        #expect(read.store == .google)
        #expect(read.kind == .refund)
        #expect(read.authenticity == .trustedChannel)
        #expect(read.storeType == "voidedPurchaseNotification")
        #expect(read.paymentId == "GPA.3371-1234-5678-90123")
        #expect(read.application == "com.studio.game")
        #expect(read.reason == "REFUND_TYPE_FULL_REFUND")
        #expect(read.occurredAt == Date(timeIntervalSince1970: Double(Self.eventTime) / 1_000))
        #expect(read.purchaseTokenHash?.count == 64)
        #expect(read.notificationId.hasPrefix("google:"))
        #expect(!"\(read)".contains(Self.token), "the token itself is kept nowhere")
    }

    @Test func aPartialRefundSaysSo() throws {
        let read = try Self.parse(Self.voided(refundType: "2")).get()
        #expect(read.reason == "REFUND_TYPE_QUANTITY_BASED_PARTIAL_REFUND")
        #expect(try Self.parse(Self.voided(refundType: "7")).get().reason == "refundType 7")
    }

    @Test func theEventTimeIsReadAsAStringOfDigitsOrAsANumber() throws {
        let asNumber = try Self.parse(Self.voided(eventTime: "1764000000123")).get()
        let asString = try Self.parse(Self.voided()).get()
        #expect(asNumber.occurredAt == asString.occurredAt)
        #expect(asNumber.notificationId == asString.notificationId)
    }

    @Test func theSameNotificationHasOneIdAndAnotherOrderAnother() throws {
        let once = try Self.parse(Self.voided()).get()
        let again = try Self.parse(Self.voided()).get()
        let other = try Self.parse(Self.voided(orderId: "GPA.3371-0000-0000-00000")).get()
        #expect(once.notificationId == again.notificationId)
        #expect(once.notificationId != other.notificationId)
    }

    @Test func thePubSubMessageAndItsPushEnvelopeAreUnwrappedAndKeepTheNotificationsOwnId() throws {
        let bare = try Self.parse(Self.voided()).get()
        let data = Data(Self.voided().utf8).base64EncodedString()
        let message = #"{"data":"\#(data)","messageId":"136969346945","attributes":{"a":"b"}}"#
        let envelope = #"{"message":\#(message),"subscription":"projects/p/subscriptions/s"}"#
        // A retried publish gets another message id: the notification is still the same one.
        let retried = message.replacingOccurrences(of: "136969346945", with: "136969346946")
        for text in [message, envelope, retried] {
            let read = try Self.parse(text).get()
            #expect(read.kind == .refund)
            #expect(read.paymentId == "GPA.3371-1234-5678-90123")
            #expect(read.notificationId == bare.notificationId)
            #expect(read.deliveryId?.hasPrefix("13696934694") == true)
        }
        let noMessageId = try Self.parse(#"{"message":{"data":"\#(data)"}}"#).get()
        #expect(noMessageId.notificationId == bare.notificationId)
        #expect(noMessageId.deliveryId == nil)
    }

    @Test func otherNotificationsAreReadAsOtherAndAnUnknownKindIsNotRefused() throws {
        let test =
            #"{"version":"1.0","packageName":"com.studio.game","eventTimeMillis":"1","testNotification":{"version":"1.0"}}"#
        let read = try Self.parse(test).get()
        #expect(read.kind == .other)
        #expect(read.storeType == "testNotification")
        #expect(read.paymentId == nil)
        let future = #"{"packageName":"com.studio.game","eventTimeMillis":"1","newKindOfNotification":{}}"#
        let unknown = try Self.parse(future).get()
        #expect(unknown.kind == .other)
        #expect(unknown.storeType == "unknown")
    }

    @Test func aNotificationAboutAnotherAppIsRefused() {
        let error = Self.refused(Self.voided(packageName: "com.other.game"), packageName: "com.studio.game")
        #expect(error?.code == .otherApplication)
        #expect(error?.description.contains("com.other.game") == true)
    }

    @Test(arguments: [
        ("", "empty"),
        ("not json", "not a JSON object"),
        ("[1,2]", "not a JSON object"),
        ("{\"data\":\"!!!\"}", "not base64"),
        ("{\"message\":{\"messageId\":\"1\"}}", "no data"),
        ("{\"packageName\":\"a\"}", "eventTimeMillis is missing"),
        ("{\"eventTimeMillis\":\"1\"}", "packageName is missing"),
        (GoogleNotificationTests.voided(eventTime: "\"9223372036854775807\""), "not a time"),
        (GoogleNotificationTests.voided(eventTime: "-1"), "not a time"),
        (GoogleNotificationTests.voided(eventTime: "\"12a\""), "not a time"),
        (GoogleNotificationTests.voided(eventTime: "\" 12\""), "not a time"),
        (GoogleNotificationTests.voided(eventTime: "1.5"), "not a time"),
        (GoogleNotificationTests.voided(refundType: "\"1\""), "refundType is not an integer"),
        (GoogleNotificationTests.voided(orderId: "GPA.1\\u0000"), "control characters"),
        (GoogleNotificationTests.voided(orderId: " GPA.1"), "white space"),
        (GoogleNotificationTests.voided(orderId: ""), "orderId is empty"),
        (GoogleNotificationTests.voided(orderId: String(repeating: "9", count: 257)), "longer than 256"),
        (GoogleNotificationTests.voided(token: ""), "purchaseToken is empty"),
        (
            GoogleNotificationTests.voided(token: String(repeating: "t", count: 8_193)),
            "purchaseToken is longer than 8192"
        ),
        (
            #"{"packageName":"a","eventTimeMillis":"1","voidedPurchaseNotification":{"orderId":"GPA.1"}}"#,
            "purchaseToken is missing"
        ),
        (
            #"{"packageName":"a","eventTimeMillis":"1","voidedPurchaseNotification":{"purchaseToken":"t"}}"#,
            "orderId is missing"
        ),
        (#"{"packageName":"a","packageName":"b","eventTimeMillis":"1"}"#, "more than once"),
        (
            #"{"packageName":"a","eventTimeMillis":"1","testNotification":{},"voidedPurchaseNotification":{}}"#,
            "more than one kind"
        ),
        (String(repeating: "{\"a\":", count: 40) + "1" + String(repeating: "}", count: 40), "nested deeper"),
        (#"{"packageName":"a","eventTimeMillis":"1","voidedPurchaseNotification":null}"#, "not a JSON object"),
        (GoogleNotificationTests.voided(eventTime: "\"\""), "not a time"),
        (GoogleNotificationTests.voided(eventTime: "\"-0\""), "not a time"),
    ])
    func aMalformedRecordIsRefusedSayingWhy(text: String, problem: String) {
        let error = Self.refused(text)
        #expect(error?.code == .malformed, "\(text.prefix(80))")
        #expect(error?.detail.contains(problem) == true, "\(error?.detail ?? "accepted"): expected \(problem)")
        #expect(error?.description.contains(Self.token) != true)
    }

    @Test func aRecordOverTheLimitOrNotUTF8IsRefusedBeforeItIsRead() {
        let huge = Self.voided(token: String(repeating: "t", count: GoogleNotification.Limits.bytes))
        #expect(Self.refused(huge)?.detail.contains("over 65536 bytes") == true)
        let latin1: [UInt8] = Array(#"{"packageName":"caf"#.utf8) + [0xE9] + Array(#"","eventTimeMillis":"1"}"#.utf8)
        guard case .failure(let error) = GoogleNotification.parse(latin1, packageName: "com.studio.game") else {
            Issue.record("a record that is not UTF-8 was read")
            return
        }
        #expect(error.detail.contains("not UTF-8"))
        let binary = Data([0xFF, 0xFE, 0x00]).base64EncodedString()
        #expect(Self.refused(#"{"data":"\#(binary)"}"#)?.detail.contains("not UTF-8") == true)
    }
}

@Suite("Stores and Gamebase's store codes")
struct StoreMarketTests {
    @Test func eachStoreIsGamebasesStoreCodeBothWays() {
        #expect(Store.apple.marketId == "AS")
        #expect(Store.google.marketId == "GG")
        for store in Store.allCases { #expect(Store(marketId: store.marketId) == store) }
        for other in ["ONESTORE", "GALAXY", "AMAZON", "gg", "", "AS "] { #expect(Store(marketId: other) == nil) }
    }
}

import Foundation
import Fulfilment
import Testing

@Suite struct PurchaseMessageTests {
    @Test func theSDKReceiptIsAcceptedAsItIs() throws {
        let receipt = #"""
            {"userId":"QXG774PMRZMWR3BR","paymentSeq":"2024051310001234","purchaseToken":"tok/+=","gamebaseProductId":"gem",
             "storeCode":"GG","payload":"p","marketItemId":"com.game.gem","productType":"CONSUMABLE","price":1.5,
             "purchaseTime":1715563230000,"extra":{"nested":[1,2,{"a":null}]}}
            """#
        let message = try PurchaseMessage.parse(Array(receipt.utf8)).get()
        #expect(message.userId == "QXG774PMRZMWR3BR")
        #expect(message.paymentSeq == "2024051310001234")
        #expect(message.purchaseToken == "tok/+=")
        #expect(message.gamebaseProductId == "gem")
        #expect(message.storeCode == "GG")
    }

    static let malformed: [(String, [UInt8])] = [
        ("not JSON", Array("hello".utf8)),
        ("truncated", Array(#"{"userId":"u","paymentSeq":"1""#.utf8)),
        ("an array", Array(#"[{"userId":"u","paymentSeq":"1","purchaseToken":"t"}]"#.utf8)),
        ("a string", Array(#""text""#.utf8)),
        ("null", Array("null".utf8)),
        ("empty", []),
        ("missing userId", Array(#"{"paymentSeq":"1","purchaseToken":"t"}"#.utf8)),
        ("missing paymentSeq", Array(#"{"userId":"u","purchaseToken":"t"}"#.utf8)),
        ("missing token", Array(#"{"userId":"u","paymentSeq":"1"}"#.utf8)),
        ("empty userId", Array(#"{"userId":"","paymentSeq":"1","purchaseToken":"t"}"#.utf8)),
        ("blank paymentSeq", Array(#"{"userId":"u","paymentSeq":"  ","purchaseToken":"t"}"#.utf8)),
        ("number paymentSeq", Array(#"{"userId":"u","paymentSeq":2024,"purchaseToken":"t"}"#.utf8)),
        ("null token", Array(#"{"userId":"u","paymentSeq":"1","purchaseToken":null}"#.utf8)),
        ("bool userId", Array(#"{"userId":true,"paymentSeq":"1","purchaseToken":"t"}"#.utf8)),
        ("object token", Array(#"{"userId":"u","paymentSeq":"1","purchaseToken":{"a":1}}"#.utf8)),
        ("number product", Array(#"{"userId":"u","paymentSeq":"1","purchaseToken":"t","gamebaseProductId":5}"#.utf8)),
        (
            "over-long paymentSeq",
            Array(#"{"userId":"u","paymentSeq":"\#(String(repeating: "9", count: 200))","purchaseToken":"t"}"#.utf8)
        ),
        (
            "over-long userId",
            Array(#"{"userId":"\#(String(repeating: "u", count: 300))","paymentSeq":"1","purchaseToken":"t"}"#.utf8)
        ),
        ("control character", Array("{\"userId\":\"u\\n\",\"paymentSeq\":\"1\",\"purchaseToken\":\"t\"}".utf8)),
        ("invalid UTF-8", [0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D]),
        ("binary garbage", (0..<512).map { UInt8(truncatingIfNeeded: $0 &* 7919) }),
        ("deep nesting", Array((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8)),
        (
            "deep object",
            Array(
                ("{\"userId\":\"u\",\"paymentSeq\":\"1\",\"purchaseToken\":\"t\",\"x\":"
                    + String(repeating: "{\"a\":", count: 64) + "1" + String(repeating: "}", count: 64) + "}").utf8)
        ),
        (
            "over 64 KiB",
            Array(
                (#"{"userId":"u","paymentSeq":"1","purchaseToken":"t","pad":""# + String(repeating: "x", count: 70_000)
                    + #""}"#).utf8)
        ),
    ]

    @Test(arguments: malformed)
    func malformedInputIsRefusedWithAReasonAndNeverCrashes(name: String, bytes: [UInt8]) {
        switch PurchaseMessage.parse(bytes) {
        case .success(let message): Issue.record("\(name) was accepted as \(message.paymentSeq)")
        case .failure(let error): #expect(!error.problem.isEmpty)
        }
    }

    @Test func problemsNeverQuoteTheToken() {
        let bytes = Array(#"{"userId":"u","paymentSeq":"1","purchaseToken":"SECRET","storeCode":7}"#.utf8)
        guard case .failure(let error) = PurchaseMessage.parse(bytes) else {
            Issue.record("accepted")
            return
        }
        #expect(!error.description.contains("SECRET"))
        #expect(error.paymentSeq == "1")
    }

    @Test func theSizeLimitIsConfigurable() {
        let bytes = Array(#"{"userId":"u","paymentSeq":"1","purchaseToken":"t"}"#.utf8)
        #expect((try? PurchaseMessage.parse(bytes, maxBytes: 1024).get()) != nil)
        #expect((try? PurchaseMessage.parse(bytes, maxBytes: 10).get()) == nil)
    }

    @Test func claimHashesAreStableAndDistinct() {
        let owner = PurchaseMessage(userId: "owner", paymentSeq: "1", purchaseToken: "t")
        let thief = PurchaseMessage(userId: "thief", paymentSeq: "1", purchaseToken: "t")
        #expect(owner.claimHash == PurchaseMessage(userId: "owner", paymentSeq: "1", purchaseToken: "t").claimHash)
        #expect(owner.claimHash != thief.claimHash)
        #expect(owner.claimHash.count == 16)
        // SHA-256 of "abc" (FIPS 180-4 test vector).
        #expect(
            PurchaseMessage(userId: "u", paymentSeq: "1", purchaseToken: "abc").tokenHash
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            PurchaseMessage(userId: "u", paymentSeq: "1", purchaseToken: "").tokenHash
                == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }
}

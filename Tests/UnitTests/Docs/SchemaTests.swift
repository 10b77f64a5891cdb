import Foundation
import Fulfilment
import IAPTestSupport
import Testing

@Suite("docs/schemas against the code")
struct SchemaTests {
    static let messages: [String] = [
        #"{"userId":"u1","paymentSeq":"p1","purchaseToken":"t1"}"#,
        #"{"userId":"u1","paymentSeq":"p1","purchaseToken":"t1","gamebaseProductId":"gems","storeCode":"GG","payload":"x","extra":{"a":1}}"#,
        #"{"userId":"u1","paymentSeq":"p1","purchaseToken":"t1","storeCode":null}"#,
        #"{"userId":"u1","paymentSeq":"p1"}"#,
        #"{"userId":"","paymentSeq":"p1","purchaseToken":"t1"}"#,
        #"{"userId":42,"paymentSeq":"p1","purchaseToken":"t1"}"#,
        #"{"userId":"u1","paymentSeq":null,"purchaseToken":"t1"}"#,
        #"{"userId":"u1","paymentSeq":true,"purchaseToken":"t1"}"#,
        #"{"userId":"u1","paymentSeq":"p1","purchaseToken":"t1","storeCode":7}"#,
        #"{"userId":"\#(String(repeating: "u", count: 257))","paymentSeq":"p1","purchaseToken":"t1"}"#,
        #"{"userId":"u1","paymentSeq":"\#(String(repeating: "9", count: 129))","purchaseToken":"t1"}"#,
        #"{"userId":"   ","paymentSeq":"p1","purchaseToken":"t1"}"#,
    ]

    /// The schema is never stricter than the worker: what the worker accepts, the schema accepts; and what the
    /// schema rejects, the worker rejects as malformed.
    @Test(arguments: messages)
    func thePurchaseMessageSchemaAndTheParserAgree(message: String) throws {
        let schema = try SchemaValidator.load("purchase-message")
        let json = try JSONSerialization.jsonObject(with: Data(message.utf8))
        let schemaAccepts = schema.violations(of: json).isEmpty
        let parserAccepts = (try? PurchaseMessage.parse(Array(message.utf8)).get()) != nil
        if parserAccepts {
            #expect(schemaAccepts, "the worker accepts what the schema rejects: \(schema.violations(of: json))")
        }
        if !schemaAccepts { #expect(!parserAccepts) }
    }

    @Test func theValidatorRejectsWhatTheSchemasForbid() throws {
        let schema = try SchemaValidator.load("consume-failed-data")
        #expect(
            schema.violations(
                of: ["reason": "user_mismatch", "retryable": false, "attempts": 1, "detail": "d"] as [String: Any]
            ).isEmpty)
        #expect(
            !schema.violations(
                of: ["reason": "no_such_reason", "retryable": false, "attempts": 1, "detail": "d"] as [String: Any]
            ).isEmpty)
        #expect(
            !schema.violations(
                of: ["reason": "user_mismatch", "retryable": "no", "attempts": 1, "detail": "d"] as [String: Any]
            ).isEmpty)
        #expect(
            !schema.violations(of: ["reason": "user_mismatch", "retryable": false, "attempts": 1] as [String: Any])
                .isEmpty)
        #expect(
            !schema.violations(
                of: ["reason": "user_mismatch", "retryable": false, "attempts": 1, "detail": "d", "x": 1]
                    as [String: Any]
            ).isEmpty)
    }
}

import Foundation
import IAPTestSupport
import Testing
import Wire

@testable import Gamebase
@testable import GamebaseHTTP

/// The client reads Gamebase answers with its own `JSONReader`; these tests hold it to what `JSONDecoder`
/// reads (and refuses) for the same types, on generated answers and on damaged copies of them.
@Suite("Reading Gamebase answers")
struct GamebaseAnswerReadingTests {
    /// What `JSONDecoder` makes of an answer: the reference.
    private struct ReferenceEnvelope<Result: Decodable & Equatable>: Decodable {
        var header: ReferenceHeader
        var result: Result?
    }

    private struct ReferenceHeader: Decodable, Equatable {
        var transactionId: String?
        var isSuccessful: Bool
        var resultCode: Int
        var resultMessage: String?
    }

    private typealias Reader<Result> = (inout JSONReader) throws(JSONReader.Failure) -> Result

    /// Any valid JSON, not looked at: a failed answer's `result`.
    private struct AnyJSON: Decodable, Equatable {
        init(from decoder: any Decoder) throws {}
    }

    /// Both readers' verdicts on `text`: nil when it was refused. The reference reads `result` only when the
    /// header says the call succeeded, as the client does.
    private func verdicts<Result: Decodable & Equatable>(_ text: [UInt8], _ read: Reader<Result>, as: Result.Type)
        -> (reference: ReferenceEnvelope<Result>?, ours: GamebaseEnvelope<Result>?)
    {
        let decoder = JSONDecoder()
        var reference: ReferenceEnvelope<Result>?
        if let headerOnly = try? decoder.decode(ReferenceEnvelope<AnyJSON>.self, from: Data(text)) {
            if headerOnly.header.isSuccessful {
                reference = try? decoder.decode(ReferenceEnvelope<Result>.self, from: Data(text))
                // The client fails closed where the model is lenient: a payment without isConsumable is no answer.
                if let payment = reference?.result as? PaymentTransaction, payment.isConsumable == nil {
                    reference = nil
                }
                // …and a payment with a NUL in a field the ledger stores is no answer either.
                if let payment = reference?.result as? PaymentTransaction, Self.holdsNUL(payment) { reference = nil }
            } else {
                reference = ReferenceEnvelope(header: headerOnly.header, result: nil)
            }
        }
        let ours = try? GamebaseEnvelope.read(text, result: read)
        return (reference, ours)
    }

    private static func holdsNUL(_ payment: PaymentTransaction) -> Bool {
        let fields = [
            payment.paymentSeq, payment.userId, payment.currency, payment.marketId, payment.accessToken,
            payment.paymentId,
            payment.paymentToken, payment.productType, payment.gamebaseProductId, payment.purchaseTime, payment.payload,
        ]
        return fields.contains { $0?.utf8.contains(0) == true }
    }

    /// A NUL or an oversized field in a payment would fail the grant on every try (PostgreSQL's text holds no NUL):
    /// such an answer is refused, so the purchase is retried and dead-lettered rather than failing in the ledger.
    @Test(arguments: [
        #"{"paymentSeq":"1","userId":"u","isConsumable":true,"payload":"a\u0000b"}"#,
        #"{"paymentSeq":"1\u0000","userId":"u","isConsumable":true}"#,
        #"{"paymentSeq":"1","userId":"u","isConsumable":true,"marketId":""# + String(repeating: "x", count: 8193)
            + #""}"#,
    ])
    func aPaymentWithAFieldTheLedgerCannotStoreIsNoAnswer(result: String) {
        let text = #"{"header":{"isSuccessful":true,"resultCode":0},"result":"# + result + "}"
        #expect(throws: JSONReader.Failure.self) {
            try GamebaseEnvelope.read(Array(text.utf8), result: PaymentTransaction.read)
        }
    }

    /// A refusal's message is kept in bytes, not Characters (one Character can hold any number of scalars).
    @Test func aRefusalsMessageIsClippedInBytes() {
        let combining = "e" + String(repeating: "\u{301}", count: 10_000)
        #expect(GamebaseClient.clipped(combining, toUTF8Bytes: 200).utf8.count <= 200)
        #expect(GamebaseClient.clipped("short", toUTF8Bytes: 200) == "short")
        #expect(GamebaseClient.clipped("한한한", toUTF8Bytes: 7) == "한한")
    }

    private func agree<Result: Decodable & Equatable>(
        _ reference: ReferenceEnvelope<Result>?, _ ours: GamebaseEnvelope<Result>?
    ) -> Bool {
        switch (reference, ours) {
        case (nil, nil): return true
        case (let reference?, let ours?):
            return reference.header.transactionId == ours.header.transactionId
                && reference.header.isSuccessful == ours.header.isSuccessful
                && reference.header.resultCode == ours.header.resultCode
                && reference.header.resultMessage == ours.header.resultMessage && reference.result == ours.result
        default: return false
        }
    }

    @Test func readsGeneratedPaymentAnswersExactlyAsJSONDecoderDoes() {
        var generator = AnswerGenerator(seed: 0x5EED_0001)
        var read = 0
        for _ in 0..<3_000 {
            let text = generator.paymentAnswer()
            let (reference, ours) = verdicts(Array(text.utf8), PaymentTransaction.read, as: PaymentTransaction.self)
            #expect(agree(reference, ours), "\(text)")
            if ours?.result != nil { read += 1 }
        }
        // Most generated answers are successful and valid, so most must have been read, not refused.
        #expect(read > 1_500)
    }

    @Test func readsGeneratedConsumeAndConsumableAnswersExactlyAsJSONDecoderDoes() {
        var generator = AnswerGenerator(seed: 0x5EED_0002)
        for _ in 0..<1_000 {
            let consume = generator.consumeAnswer()
            let (reference, ours) = verdicts(Array(consume.utf8), ConsumeResult.read, as: ConsumeResult.self)
            #expect(agree(reference, ours), "\(consume)")
            let list = generator.consumableAnswer()
            let (listReference, listOurs) = verdicts(
                Array(list.utf8), ConsumableItem.readList, as: [ConsumableItem].self)
            #expect(agree(listReference, listOurs), "\(list)")
        }
    }

    /// `JSONDecoder` does not look inside values it skips (a bad escape or invalid UTF-8 in an unknown field
    /// passes) and allows a trailing comma; the reader follows RFC 8259 there. So on damaged answers it must
    /// refuse whatever `JSONDecoder` refuses, read the same values from what both accept, and refuse more only
    /// where the text is not JSON: `JSONSerialization`, which reads every value, refuses it, or it has a
    /// trailing comma.
    @Test func refusesWhatJSONDecoderRefusesInDamagedAnswersAndNothingValid() {
        var generator = AnswerGenerator(seed: 0x5EED_0003)
        var refused = 0
        var stricter = 0
        for _ in 0..<20_000 {
            let damaged = generator.damaged(Array(generator.paymentAnswer().utf8))
            let (reference, ours) = verdicts(damaged, PaymentTransaction.read, as: PaymentTransaction.self)
            let shown = String(decoding: damaged, as: UTF8.self).debugDescription
            if reference != nil, ours == nil {
                let valid = (try? JSONSerialization.jsonObject(with: Data(damaged), options: .fragmentsAllowed)) != nil
                #expect(!valid || Self.hasTrailingComma(damaged), "refused valid JSON: \(shown)")
                stricter += 1
            } else {
                #expect(agree(reference, ours), "\(shown)")
            }
            if ours == nil { refused += 1 }
        }
        #expect(refused > 5_000)
        #expect(stricter < refused / 4)
    }

    /// A `,` followed (after whitespace) by `}` or `]`, outside strings.
    private static func hasTrailingComma(_ bytes: [UInt8]) -> Bool {
        var inString = false
        var escaped = false
        var afterComma = false
        for byte in bytes {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                inString = true
                afterComma = false
            case UInt8(ascii: ","): afterComma = true
            case UInt8(ascii: "}"), UInt8(ascii: "]"): if afterComma { return true }
            case 0x20, 0x0A, 0x0D, 0x09: break
            default: afterComma = false
            }
        }
        return false
    }

    @Test(arguments: [
        "", " ", "{", "[]", "null", #"{"header":{"isSuccessful":true,"resultCode":0}} x"#,
        #"{"header":{"isSuccessful":true,"resultCode":0}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0,"resultMessage":"a\x"}}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0,"resultMessage":"\ud800"}}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0,"resultMessage":"\udc00\ud800"}}"#,
        "{\"header\":{\"isSuccessful\":true,\"resultCode\":0,\"resultMessage\":\"tab\there\"}}",
        #"{"header":{"isSuccessful":true,"resultCode":01}}"#, #"{"header":{"isSuccessful":true,"resultCode":-}}"#,
        #"{"header":{"isSuccessful":true,"resultCode":+1}}"#, #"{"header":{"isSuccessful":true,"resultCode":1.}}"#,
        #"{"header":{"isSuccessful":true,"resultCode":.5}}"#, #"{"header":{"isSuccessful":true,"resultCode":1e}}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0.5}}"#, #"{"header":{"isSuccessful":tru,"resultCode":0}}"#,
        #"{"header":{"isSuccessful":"true","resultCode":0}}"#, #"{"header":{"isSuccessful":true}}"#,
        #"{"header":null}"#, #"{"result":{}}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0},"result":{"userId":"u"}}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0},"result":{"paymentSeq":1,"userId":"u"}}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0},"result":{"paymentSeq":"1","userId":"u","productSeq":1.5}}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0},"result":{"paymentSeq":"1","userId":"u","productSeq":1e30}}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0},"result":{"paymentSeq":"1","userId":"u","price":"2.29"}}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0},"result":{"paymentSeq":"1","userId":"u","isConsumable":1}}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0},"result":[]}"#,
        String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
        #"{"header":{"isSuccessful":true,"resultCode":0},"x":"# + String(repeating: "[", count: 600)
            + String(repeating: "]", count: 600) + "}",
    ])
    func refusesMalformedAnswers(_ text: String) {
        let (reference, ours) = verdicts(Array(text.utf8), PaymentTransaction.read, as: PaymentTransaction.self)
        #expect(ours == nil)
        #expect(reference == nil, "JSONDecoder accepts it, so the reader should too")
    }

    @Test(arguments: [
        #"{"header":{"isSuccessful":true,"resultCode":0},}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0,"x":[1,]}}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0,"x":"\q"}}"#,
    ])
    func refusesInvalidJSONThatJSONDecoderLetsThrough(_ text: String) {
        #expect(throws: JSONReader.Failure.self) {
            try GamebaseEnvelope.read(Array(text.utf8), result: PaymentTransaction.read)
        }
    }

    @Test func refusesInvalidUTF8InAString() {
        var bytes = Array(#"{"header":{"isSuccessful":true,"resultCode":0,"resultMessage":"ab"}}"#.utf8)
        bytes.insert(0xFF, at: bytes.count - 4)
        #expect(throws: JSONReader.Failure.self) { try GamebaseEnvelope.read(bytes, result: PaymentTransaction.read) }
    }

    @Test func readsEscapesAndSurrogatePairsAsJSONDecoderDoes() throws {
        let text =
            #"{"header":{"isSuccessful":true,"resultCode":0,"resultMessage":"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00 é 😀"}}"#
        let envelope = try GamebaseEnvelope.read(Array(text.utf8), result: PaymentTransaction.read)
        #expect(envelope.header.resultMessage == "\"\\/\u{8}\u{c}\n\r\té😀 é 😀")
    }

    @Test func aFailedAnswerIsReadForItsHeaderWhateverItsResult() throws {
        let text =
            #"{"result":{"unexpected":true},"header":{"isSuccessful":false,"resultCode":1100,"resultMessage":"invalid"}}"#
        let envelope = try GamebaseEnvelope.read(Array(text.utf8), result: PaymentTransaction.read)
        #expect(envelope.header.resultCode == 1100)
        #expect(envelope.result == nil)
    }

    @Test(arguments: [
        #"{"paymentSeq":"1","userId":"u"}"#, #"{"paymentSeq":"1","userId":"u","isConsumable":null}"#,
        #"{"userId":"u","isConsumable":true}"#, #"{"paymentSeq":"1","isConsumable":true}"#,
        #"{"paymentSeq":null,"userId":"u","isConsumable":true}"#,
        #"{"paymentSeq":"1","userId":"u","isConsumable":"true"}"#,
    ])
    func aPaymentLackingWhatTheChecksNeedIsNoAnswer(result: String) {
        let text = #"{"header":{"isSuccessful":true,"resultCode":0},"result":"# + result + "}"
        #expect(throws: JSONReader.Failure.self) {
            try GamebaseEnvelope.read(Array(text.utf8), result: PaymentTransaction.read)
        }
    }

    @Test(arguments: [
        "1e400", "-1e400", "1e-400", "1" + String(repeating: "0", count: 80), "0." + String(repeating: "1", count: 80),
    ])
    func aPriceNoDecimalHoldsIsNoAnswer(price: String) {
        let text =
            #"{"header":{"isSuccessful":true,"resultCode":0},"result":{"paymentSeq":"1","userId":"u","isConsumable":true,"price":"#
            + price + "}}"
        #expect(throws: JSONReader.Failure.self) {
            try GamebaseEnvelope.read(Array(text.utf8), result: PaymentTransaction.read)
        }
    }

    @Test func aPriceIsReadWithoutBinaryFloatingPoint() throws {
        let text =
            #"{"header":{"isSuccessful":true,"resultCode":0},"result":{"paymentSeq":"1","userId":"u","price":0.1,"isConsumable":true}}"#
        let envelope = try GamebaseEnvelope.read(Array(text.utf8), result: PaymentTransaction.read)
        #expect(envelope.result?.price == Decimal(string: "0.1"))
        #expect("\(envelope.result!.price!)" == "0.1")
    }
}

/// Gamebase answers written at random: fields in any order, missing or null, unknown fields with nested
/// values, strings with escapes and non-ASCII text, numbers in every JSON form.
private struct AnswerGenerator {
    private var random: SplitMix
    /// Whether strings may hold an escaped NUL. Not in payments: the client refuses a payment holding one (the
    /// ledger cannot store it; `aPaymentWithAFieldTheLedgerCannotStoreIsNoAnswer`), where JSONDecoder reads it.
    private var nulInStrings = true

    init(seed: UInt64) { random = SplitMix(seed) }

    mutating func next() -> UInt64 { random.next() }

    private mutating func below(_ n: Int) -> Int { random.below(n) }
    private mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    private mutating func pick<T>(_ options: [T]) -> T { options[below(options.count)] }

    private mutating func whitespace() -> String { chance(80) ? "" : pick([" ", "\n", "\t ", "\r\n  "]) }

    mutating func string() -> String {
        let pieces = [
            "a", "Z", "9", "-", "_", ".", " ", "é", "한", "😀", "\\\"", "\\\\", "\\/", "\\n", "\\t", "\\u00e9", "\\u0000",
            "\\uD83D\\uDE00", "\\u001f", "GPA.1234-5678", "{\\\"c\\\":1}",
        ].filter { nulInStrings || $0 != "\\u0000" }
        return "\"" + (0..<below(12)).map { _ in pick(pieces) }.joined() + "\""
    }

    mutating func number() -> String {
        pick([
            "0", "-0", "1", "42", "-7", "1000123", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
            "2.29", "0.1", "-1.5", "1e3", "1E+2", "2.5e-3", "1.0", "100.00", "12345678901234567890", "0.000001",
        ])
    }

    mutating func anyValue(depth: Int = 0) -> String {
        switch below(depth > 3 ? 5 : 7) {
        case 0: return string()
        case 1: return number()
        case 2: return pick(["true", "false"])
        case 3: return "null"
        case 4: return string()
        case 5:
            return "[" + (0..<below(4)).map { _ in whitespace() + anyValue(depth: depth + 1) }.joined(separator: ",")
                + "]"
        default:
            return "{" + (0..<below(4)).map { _ in string() + ":" + anyValue(depth: depth + 1) }.joined(separator: ",")
                + "}"
        }
    }

    private mutating func object(_ members: [(String, String)], unknown: Bool = true) -> String {
        var members = members
        if unknown, chance(40) {
            for _ in 0..<(1 + below(3)) { members.append(("\"extra\(below(5))\"", anyValue())) }
        }
        members.shuffle(using: &self)
        return "{" + whitespace()
            + members.map { "\($0.0)" + whitespace() + ":" + whitespace() + $0.1 }
            .joined(separator: "," + whitespace()) + whitespace() + "}"
    }

    /// A field's value: usually of its type, sometimes null, rarely of another type.
    private mutating func field(_ name: String, _ typed: String) -> [(String, String)] {
        if chance(15) { return [] }
        if chance(8) { return [("\"\(name)\"", "null")] }
        if chance(3) { return [("\"\(name)\"", anyValue())] }
        return [("\"\(name)\"", typed)]
    }

    private mutating func integer() -> String { chance(90) ? pick(["1000123", "0", "-3", "7"]) : number() }
    private mutating func decimal() -> String { chance(90) ? pick(["2.29", "0.99", "1200", "1.5e2"]) : number() }
    private mutating func bool() -> String { pick(["true", "false"]) }

    private mutating func header() -> String {
        let success = chance(90)
        var members: [(String, String)] = [
            ("\"isSuccessful\"", success ? "true" : "false"),
            ("\"resultCode\"", success ? "0" : pick(["1100", "-4060001", "5018"])),
        ]
        members += field("transactionId", string())
        members += field("resultMessage", string())
        return object(members)
    }

    private mutating func envelope(_ result: String?) -> String {
        var members = [("\"header\"", header())]
        if let result { members.append(("\"result\"", result)) }
        return whitespace() + object(members, unknown: chance(30)) + whitespace()
    }

    mutating func paymentAnswer() -> String {
        nulInStrings = false
        defer { nulInStrings = true }
        var members: [(String, String)] = []
        members += chance(97) ? [("\"paymentSeq\"", string())] : field("paymentSeq", string())
        members += chance(97) ? [("\"userId\"", string())] : field("userId", string())
        members += field("productSeq", integer())
        for name in [
            "currency", "marketId", "accessToken", "paymentId", "paymentToken", "productType", "gamebaseProductId",
            "purchaseTime", "payload",
        ] {
            members += field(name, string())
        }
        members += field("price", decimal())
        members += field("isTestPurchase", bool())
        members += field("isConsumable", bool())
        return envelope(chance(95) ? object(members) : pick(["null", "{}", "[]"]))
    }

    mutating func consumeAnswer() -> String {
        var members: [(String, String)] = []
        members += field("price", decimal())
        members += field("productSeq", integer())
        for name in ["currency", "marketId", "gamebaseProductId", "payload"] { members += field(name, string()) }
        return envelope(chance(90) ? object(members) : nil)
    }

    mutating func consumableAnswer() -> String {
        let items = (0..<below(4)).map { _ in
            var members: [(String, String)] = [("\"paymentSeq\"", string())]
            members += field("productSeq", integer())
            members += field("price", decimal())
            members += field("isTestPurchase", bool())
            for name in [
                "currency", "marketId", "accessToken", "paymentId", "gamebaseProductId", "purchaseTime", "payload",
            ] {
                members += field(name, string())
            }
            return object(members)
        }
        return envelope("[" + items.joined(separator: ",") + "]")
    }

    /// `text` with one to three bytes deleted, inserted or replaced by bytes that matter to JSON.
    mutating func damaged(_ text: [UInt8]) -> [UInt8] {
        var bytes = text
        let significant = Array("{}[]\":,\\ tfn0-1.eE+u".utf8) + [0x00, 0x0A, 0x80, 0xC3, 0xFF]
        for _ in 0..<(1 + below(3)) where !bytes.isEmpty {
            let at = below(bytes.count)
            switch below(3) {
            case 0: bytes.remove(at: at)
            case 1: bytes.insert(pick(significant), at: at)
            default: bytes[at] = pick(significant)
            }
        }
        return bytes
    }
}

extension AnswerGenerator: RandomNumberGenerator {}

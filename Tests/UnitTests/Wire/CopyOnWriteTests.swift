import Foundation
import Fulfilment
import Gamebase
import Testing
import Wire

/// The records a purchase carries across its suspension points keep their fields in one shared box: each copy in an
/// async frame is a pointer, and a copy that changes is a value of its own.
@Suite("Records boxed copy-on-write")
struct CopyOnWriteTests {
    static let grant = GrantRecord(
        paymentSeq: "2026112900000001", userId: "player-1", gamebaseProductId: "gem_100", purchaseToken: "token",
        price: "2.29", currency: "USD", grantedAt: Date(timeIntervalSince1970: 1_800_000_000))

    @Test func aCopyThatChangesLeavesTheOriginalAsItWas() {
        let original = Self.grant
        var copy = original
        copy.state = .consumed
        copy.consumeAttempts += 1
        #expect(original.state == .granted)
        #expect(original.consumeAttempts == 0)
        #expect(copy.state == .consumed && copy.consumeAttempts == 1)
        #expect(copy != original)
        copy.state = .granted
        copy.consumeAttempts = 0
        #expect(copy == original, "equal by value, not by box")
        #expect(copy.hashValue == original.hashValue)
        #expect(Set([copy, original]).count == 1)
    }

    @Test func aBoxChangedInPlaceIsNotShared() {
        var box = CopyOnWrite([1, 2, 3])
        let shared = box
        box.value.append(4)
        #expect(shared.value == [1, 2, 3])
        #expect(box.value == [1, 2, 3, 4])
        var alone = CopyOnWrite("a")
        alone.value += "b"
        #expect(alone.value == "ab")
    }

    /// What the frames of every purchase in flight hold of each: one pointer (issue #39).
    @Test func eachRecordIsOnePointerWide() {
        #expect(MemoryLayout<GrantRecord>.size == MemoryLayout<UnsafeRawPointer>.size)
        #expect(MemoryLayout<RejectionRecord>.size == MemoryLayout<UnsafeRawPointer>.size)
        #expect(MemoryLayout<PaymentTransaction>.size == MemoryLayout<UnsafeRawPointer>.size)
        #expect(MemoryLayout<LedgerLookup>.size <= 2 * MemoryLayout<UnsafeRawPointer>.size)
        // An error rides in every typed `throws(GamebaseError)` slot and in an outcome's payload; inline, each of the
        // 16 outcome slots of the engine's retry loop was 136 bytes.
        #expect(MemoryLayout<GamebaseError>.size == MemoryLayout<UnsafeRawPointer>.size)
        #expect(MemoryLayout<PurchaseOutcome>.size <= 3 * MemoryLayout<UnsafeRawPointer>.size)
        #expect(MemoryLayout<ConsumeResult>.size == MemoryLayout<UnsafeRawPointer>.size)
        #expect(MemoryLayout<ConsumeOutcome>.size <= 2 * MemoryLayout<UnsafeRawPointer>.size)
        #expect(MemoryLayout<PaymentVerdict>.size == MemoryLayout<UnsafeRawPointer>.size)
    }

    /// Consume's answer keeps its JSON shape and its value semantics in the box.
    @Test func aConsumeResultCodesAsItsFieldsAndCopiesApart() throws {
        let result = ConsumeResult(price: Decimal(string: "1.99"), currency: "USD", gamebaseProductId: "gem_100")
        let encoded = try JSONEncoder().encode(result)
        let object = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        #expect(Set(object.keys) == ["price", "currency", "gamebaseProductId"])
        #expect(try JSONDecoder().decode(ConsumeResult.self, from: encoded) == result)
        var changed = result
        changed.marketId = "GG"
        #expect(result.marketId == nil && changed.marketId == "GG" && changed != result)
        var verdict = PaymentVerdict(paymentId: "GPA.1", price: "1.99")
        let kept = verdict
        verdict.currency = "USD"
        #expect(kept.currency == nil && verdict.currency == "USD" && kept != verdict)
        #expect(PaymentVerdict(paymentId: "GPA.1", price: "1.99") == kept)
    }

    @Test func aGamebaseErrorComparesByItsFieldsNotItsBox() {
        func error(_ message: String, line: UInt = 1) -> GamebaseError {
            GamebaseError(
                code: .resultCode, api: "consume", resultCode: .alreadyConsumed, resultMessage: "already",
                httpStatus: 200, transactionID: "tx-1", message: message, file: "F", line: line)
        }
        let first = error("m")
        let copy = first
        #expect(first == copy)
        #expect(first == error("m"), "another box, the same fields")
        #expect(first != error("n"))
        #expect(first != error("m", line: 2))
        #expect(copy.resultCode == .alreadyConsumed && copy.httpStatus == 200 && copy.api == "consume")
        #expect(copy.description == error("m").description)
    }

    /// The Gamebase simulator writes payments with the encoder: the JSON is the answer's own shape, the box unseen.
    @Test func aPaymentTransactionCodesAsItsFieldsAlone() throws {
        let payment = PaymentTransaction(
            paymentSeq: "2026112900000001", userId: "player-1", productSeq: 7, currency: "KRW",
            price: Decimal(string: "1200"), isConsumable: true)
        let encoded = try JSONEncoder().encode(payment)
        let object = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        #expect(Set(object.keys) == ["paymentSeq", "userId", "productSeq", "currency", "price", "isConsumable"])
        #expect(object["userId"] as? String == "player-1")
        let decoded = try JSONDecoder().decode(PaymentTransaction.self, from: encoded)
        #expect(decoded == payment)
        let missing = try JSONDecoder().decode(
            PaymentTransaction.self, from: Data(#"{"paymentSeq":"1","userId":"u"}"#.utf8))
        #expect(missing.price == nil && missing.isConsumable == nil)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(PaymentTransaction.self, from: Data(#"{"paymentSeq":"1"}"#.utf8))
        }
    }
}

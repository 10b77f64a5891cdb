import Foundation
import Fulfilment
import Sandbox
import Testing

/// The mixed bench's workload holds the proportions docs/benchmarks.md lists, and each message is what its kind says
/// to the worker's own parser.
@Suite("The mixed bench's workload")
struct MixedWorkloadTests {
    @Test func tenThousandValidPurchasesMake16512MessagesInTheDocumentedKinds() {
        let workload = MixedWorkload(valid: 10_000)
        #expect(workload.messages.count == 16_512)
        #expect(workload.kinds.map(\.count).reduce(0, +) == workload.messages.count)
        #expect(
            Dictionary(uniqueKeysWithValues: workload.kinds.map { ($0.label, $0.count) }) == [
                "valid purchases": 10_000, "duplicates (half under another key)": 3_000,
                "claims before the owner's message": 1_000, "forged tokens": 1_500, "stolen purchases": 250,
                "subscriptions": 250, "consumed elsewhere": 250, "paymentSeq/token mismatches": 250,
                "malformed (12 kinds)": 12,
            ])
        // Gamebase knows the valid purchases, the subscriptions and those consumed elsewhere.
        #expect(workload.payments.count == 10_500)
    }

    @Test func eachValidPurchaseIsTimedOnceAndItsEarlyClaimComesFirstOnItsKey() throws {
        let workload = MixedWorkload(valid: 1_000)
        let timed = workload.messages.compactMap(\.validSeq)
        #expect(timed.count == 1_000 && Set(timed).count == 1_000)
        var firstClaim: [String: Int] = [:]
        for (index, message) in workload.messages.enumerated() {
            guard case .success(let parsed) = PurchaseMessage.parse(message.value) else { continue }
            if message.validSeq == nil, parsed.userId.hasPrefix("claimer") {
                firstClaim[parsed.paymentSeq] = index
                continue
            }
            if let seq = message.validSeq, let claim = firstClaim[seq] {
                #expect(workload.messages[claim].key == message.key, "a claim on another key than its owner's")
                firstClaim[seq] = nil
            }
        }
        #expect(firstClaim.isEmpty, "claims read after their owner's message: \(firstClaim.keys.sorted().prefix(5))")
    }

    @Test func theMalformedRecordsAreMalformedAndTheOthersParse() {
        let workload = MixedWorkload(valid: 10_000)
        var malformed = 0
        for message in workload.messages {
            if case .failure = PurchaseMessage.parse(message.value) { malformed += 1 }
        }
        #expect(malformed == 12)
        let receipts = workload.messages.filter { $0.validSeq != nil && $0.value.count > 1_000 }.count
        #expect(receipts == 2_000, "one valid message in five carries its receipt")
    }

    @Test func smallAndOddSizesStillHoldEveryKind() {
        for valid in [1, 7, 33] {
            let workload = MixedWorkload(valid: valid)
            #expect(workload.kinds.map(\.count).reduce(0, +) == workload.messages.count)
            #expect(workload.messages.compactMap(\.validSeq).count == valid)
        }
    }
}

import Foundation
import Fulfilment
import Testing

@testable import Sandbox

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

    /// Each message classified from what it says, counted apart from the workload's own tally: the kinds table must
    /// match at sizes whose shares round up or down.
    @Test(arguments: [1, 7, 15, 25, 33, 10_005])
    func theKindsTableCountsWhatWasPlaced(_ valid: Int) {
        let workload = MixedWorkload(valid: valid)
        var counted: [String: Int] = [:]
        for message in workload.messages {
            guard case .success(let parsed) = PurchaseMessage.parse(message.value) else {
                counted["malformed (12 kinds)", default: 0] += 1
                continue
            }
            let kind: String =
                if message.validSeq != nil { "valid purchases" } else if parsed.userId.hasPrefix("claimer") {
                    "claims before the owner's message"
                } else if parsed.userId.hasPrefix("thief") {
                    "stolen purchases"
                } else if parsed.paymentSeq.hasPrefix("forged") {
                    "forged tokens"
                } else if parsed.paymentSeq.hasPrefix("sub") {
                    "subscriptions"
                } else if parsed.paymentSeq.hasPrefix("else") {
                    "consumed elsewhere"
                } else if parsed.paymentSeq.hasPrefix("mismatch") { "paymentSeq/token mismatches" } else {
                    "duplicates (half under another key)"
                }
            counted[kind, default: 0] += 1
        }
        #expect(
            Dictionary(uniqueKeysWithValues: workload.kinds.map { ($0.label, $0.count) }).filter { $0.value > 0 }
                == counted)
        #expect(workload.messages.compactMap(\.validSeq).count == valid)
        #expect(workload.expectedOutcomes.values.reduce(0, +) == workload.messages.count)
        #expect(workload.expectedOutcomes["granted"] == valid)
    }

    /// A count that a fixed multiplier divides would put a whole kind at one position; the spread is one to one.
    @Test(arguments: [7_919, 2 * 7_919, 7_919 * 7_927, 1, 2, 16_512])
    func theScrambleIsOneToOneWhateverTheCount(_ count: Int) {
        let sample = min(count, 20_000)
        let images = Set((0..<sample).map { MixedWorkload.scramble($0, count) })
        #expect(images.count == sample)
        #expect(images.allSatisfy { (0..<count).contains($0) })
    }
}

/// A mixed run is judged by what it must hold, not only by its consumes: each rule it breaks is said.
@Suite("The mixed bench's verdict on a run")
struct MixedRunVerdictTests {
    static func run(
        outcomes: [String: Int], grantedAmiss: Int = 0, consumedTwice: Int = 0, notConsumed: Int = 0,
        exitStatus: Int? = 0
    ) -> MixedBenchmark.Run {
        MixedBenchmark.Run(
            worker: "worker", valid: 10, messages: 17, seconds: 1, workerCPUSeconds: 0.01,
            workerCPUMicrosecondsPerMessage: 1, workerCPUMicrosecondsPerValid: 1, simulatorCPUMicrosecondsPerMessage: 1,
            messagesPerSecond: 17, p50Ms: 1, p99Ms: 1, peakRSSMiB: 1, outcomes: outcomes, notConsumed: notConsumed,
            consumedTwice: consumedTwice, grantedAmiss: grantedAmiss,
            expectedOutcomes: ["granted": 10, "duplicate": 3, "rejected": 3, "malformed": 1],
            workerExitStatus: exitStatus)
    }

    @Test func aRunThatHeldEveryRuleHasNoProblemEvenWithZeroCountsOfOtherOutcomes() {
        #expect(
            Self.run(outcomes: ["granted": 10, "duplicate": 3, "rejected": 3, "malformed": 1, "dead_lettered": 0])
                .problems.isEmpty)
    }

    @Test func aPurchaseGrantedToTheClaimerIsAProblemThoughEveryCountMatches() {
        let run = Self.run(
            outcomes: ["granted": 10, "duplicate": 3, "rejected": 3, "malformed": 1], grantedAmiss: 1)
        #expect(run.problems.count == 1)
    }

    @Test func otherOutcomeCountsAConsumeTwiceAndAWorkerKilledAreEachAProblem() {
        #expect(Self.run(outcomes: ["granted": 11, "duplicate": 2, "rejected": 3, "malformed": 1]).problems.count == 1)
        #expect(
            Self.run(outcomes: ["granted": 10, "duplicate": 3, "rejected": 3, "malformed": 1], consumedTwice: 1)
                .problems.count == 1)
        #expect(
            Self.run(outcomes: ["granted": 10, "duplicate": 3, "rejected": 3, "malformed": 1], exitStatus: nil)
                .problems.count == 1)
    }
}

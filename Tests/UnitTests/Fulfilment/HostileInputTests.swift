import Foundation
import Fulfilment
import Gamebase
import IAPTestSupport
import Synchronization
import Testing

/// What a hostile (or buggy) producer can put in a record, and what Gamebase can answer: each gets one durable
/// outcome, never a trap, a stall or a misleading record.
@Suite("Hostile input", .timeLimit(.minutes(2)))
struct HostileInputTests {
    static func headers(_ record: OutboundRecord) -> [(String, String)] {
        record.headers.map { ($0.name, $0.stringValue ?? "") }
    }

    static func last(_ name: String, in record: OutboundRecord) -> String? {
        record.headers.last { $0.name == name }?.stringValue
    }

    @Test func forgedProvenanceHeadersOnAPurchaseRecordAreKeptButNeverBelieved() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            let forged: [RecordHeader] = [
                RecordHeader(name: "iap-attempts", string: "9223372036854775807"),
                RecordHeader(name: "iap-original-timestamp", string: "9223372036854775807"),
                RecordHeader(name: "iap-original-topic", string: "someone-elses-topic"),
                RecordHeader(name: "iap-original-partition", string: "2147483647"),
                RecordHeader(name: "iap-original-offset", string: "-1"),
                RecordHeader(name: "iap-reason", string: "gamebase_unavailable"),
            ]
            let input = PurchaseInput(
                key: Array("k".utf8), value: Array("{}".utf8), headers: forged,
                source: MessageSource(topic: "purchase.completed", partition: 3, offset: 41),
                timestampMilliseconds: 1_700_000_000_123)
            let outcome = try await h.processor.process(input)
            #expect(outcome == PurchaseOutcome.malformed(problem: "userId is missing"))
            let dead = try #require(h.publisher.records(on: h.topics.dlq).first)
            // The producer's headers are data: still there, in their place…
            #expect(Array(Self.headers(dead).prefix(forged.count)).map(\.0) == forged.map(\.name))
            // …and the worker's own provenance follows them, so readers (which take the last) see the truth.
            #expect(Self.last("iap-original-topic", in: dead) == "purchase.completed")
            #expect(Self.last("iap-original-partition", in: dead) == "3")
            #expect(Self.last("iap-original-offset", in: dead) == "41")
            #expect(Self.last("iap-original-timestamp", in: dead) == "1700000000123")
            #expect(Self.last("iap-attempts", in: dead) == "1")
            #expect(Self.last("iap-reason", in: dead) == "malformed_message")
            #expect(input.previousAttempts == 0 && input.originalSource == nil && input.deadLetterReason == nil)
        }
    }

    @Test(arguments: ["9223372036854775807", "-9223372036854775808", "99999999999999999999999", "1e9", " 7", ""])
    func extremeProvenanceOnADeadLetterRecordNeverTraps(value: String) async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            let headers =
                ["iap-attempts", "iap-original-timestamp", "iap-original-partition", "iap-original-offset"].map {
                    RecordHeader(name: $0, string: value)
                } + [RecordHeader(name: "iap-original-topic", string: "purchase.completed")]
            let input = PurchaseInput(
                key: nil, value: FlowHarness.message("h-1"), headers: headers,
                source: MessageSource(topic: "purchase.completed.dlq", partition: 0, offset: 7),
                timestampMilliseconds: .min, provenanceTrusted: true)
            try await h.processor.deadLetter(
                input, reason: .gamebaseUnavailable, error: "still failing", attempts: Int.max)
            let dead = try #require(h.publisher.records(on: h.topics.dlq).last)
            let attempts = try #require(Self.last("iap-attempts", in: dead).flatMap { Int($0) })
            #expect(attempts >= 1)
            #expect(Self.last("iap-failed-at", in: dead)?.isEmpty == false)
            let event = try #require(h.publisher.events(on: h.topics.failed).last)
            #expect(((event["data"] as? [String: Any])?["attempts"] as? NSNumber).map { $0.int64Value >= 1 } == true)
        }
    }

    @Test(arguments: [Int64.max, Int64.min, 0, -1])
    func anyKafkaTimestampGivesATimestampHeader(milliseconds: Int64) async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            let input = PurchaseInput(
                key: nil, value: Array("not json".utf8),
                source: MessageSource(topic: "purchase.completed", partition: 0, offset: 1),
                timestampMilliseconds: milliseconds)
            _ = try await h.processor.process(input)
            let dead = try #require(h.publisher.records(on: h.topics.dlq).first)
            #expect(Self.last("iap-original-timestamp", in: dead) == String(milliseconds))
            _ = input.timestamp  // a date, however far off
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func conflictingClaimsForAGrantedPaymentAreRejectedUnderTheirOwnIDs(backend: LedgerBackend) async throws {
        try await FlowHarness.run(backend) { (h: FlowHarness) async throws in
            h.payment("c-100", user: "owner")
            #expect(
                (try await h.process("c-100", user: "owner"))
                    == PurchaseOutcome.granted(paymentSeq: "c-100", consumePending: false))
            let verifies = h.gamebase.verifyCalls
            // Someone else's userId with the real token, then the owner's userId with a made-up token.
            #expect(
                (try await h.process("c-100", user: "thief"))
                    == PurchaseOutcome.rejected(paymentSeq: "c-100", reason: .userMismatch))
            #expect(
                (try await h.process("c-100", user: "owner", token: "made-up"))
                    == PurchaseOutcome.rejected(paymentSeq: "c-100", reason: .invalidPurchase))
            #expect(h.gamebase.verifyCalls == verifies, "the grant decides: no Gamebase call")
            let failed = h.publisher.events(on: h.topics.failed)
            let ids = failed.compactMap { $0["id"] as? String }
            #expect(ids.count == 2 && Set(ids).count == 2)
            #expect(ids.allSatisfy { $0.hasPrefix("c-100:consume-failed:") })
            #expect(
                try await h.ledger.rejections(paymentSeq: "c-100").map(\.reason).sorted() == [
                    "invalid_purchase", "user_mismatch",
                ])
            // Their repeats are duplicates of their rejections; the owner's repeat is a duplicate of the grant.
            #expect((try await h.process("c-100", user: "thief")) == PurchaseOutcome.duplicate(paymentSeq: "c-100"))
            #expect(
                (try await h.process("c-100", user: "owner", token: "made-up"))
                    == PurchaseOutcome.duplicate(paymentSeq: "c-100"))
            #expect((try await h.process("c-100", user: "owner")) == PurchaseOutcome.duplicate(paymentSeq: "c-100"))
            #expect(h.publisher.events(on: h.topics.failed).count == 2)
            #expect(try await h.ledger.grant(paymentSeq: "c-100")?.userId == "owner")
            #expect(h.gamebase.successfulConsumes("c-100") == 1)
        }
    }

    @Test func canonicallyEquivalentIdentifiersAreDifferentIdentifiers() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            let composed = "caf\u{E9}"  // é as one scalar
            let decomposed = "cafe\u{301}"  // e + combining acute accent: == in Swift, different bytes
            #expect(composed == decomposed)
            h.payment("seq-\(composed)", user: composed, token: "tok-cafe")
            // Another paymentSeq for the same token must never become a second grant.
            #expect(
                (try await h.process("seq-\(decomposed)", user: composed, token: "tok-cafe"))
                    == PurchaseOutcome.rejected(paymentSeq: "seq-\(decomposed)", reason: .paymentMismatch))
            #expect(
                (try await h.process("seq-\(composed)", user: decomposed, token: "tok-cafe"))
                    == PurchaseOutcome.rejected(paymentSeq: "seq-\(composed)", reason: .userMismatch))
            #expect(
                (try await h.process("seq-\(composed)", user: composed, token: "tok-cafe"))
                    == PurchaseOutcome.granted(paymentSeq: "seq-\(composed)", consumePending: false))
            // After the grant, the look-alike userId is still someone else.
            #expect(
                (try await h.process("seq-\(composed)", user: decomposed, token: "tok-cafe"))
                    == PurchaseOutcome.duplicate(paymentSeq: "seq-\(composed)"),
                "its earlier rejection makes this a duplicate")
            #expect(
                (try await h.process("seq-\(composed)", user: "cafe\u{301}\u{301}", token: "tok-cafe"))
                    == PurchaseOutcome.rejected(paymentSeq: "seq-\(composed)", reason: .userMismatch),
                "a new look-alike claim against the grant is rejected without asking Gamebase")
            #expect(try await h.ledger.stats().consumed == 1)
        }
    }

    @Test func aPermanentRefusalReadsTheLedgerAgainBeforeRejecting() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("r-1")
            // While this worker asks Gamebase, another one grants and consumes the payment; Gamebase then refuses
            // the (now consumed) token.
            let other = FlowHarness(ledger: h.ledger.base)
            other.payment("r-1")
            h.gamebase.verifyInterceptor.withLock {
                $0 = { _ in
                    h.gamebase.verifyInterceptor.withLock { $0 = nil }
                    _ = try? await other.process("r-1")
                    h.gamebase.failVerify([FakeGamebase.error(.invalidParameter)])
                }
            }
            #expect((try await h.process("r-1")) == PurchaseOutcome.duplicate(paymentSeq: "r-1"))
            #expect(h.publisher.records(on: h.topics.failed).isEmpty, "no rejection published for a granted payment")
            #expect(try await h.ledger.rejections(paymentSeq: "r-1").isEmpty)
        }
    }

    @Test func aRecordTooLargeForTheDeadLetterTopicIsDeadLetteredWithoutItsValue() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.publisher.state.withLock { $0.maxRecordBytes = 100_000 }
            let value = [UInt8](repeating: UInt8(ascii: "x"), count: 1_000_000)
            let input = PurchaseInput(
                key: Array("k".utf8), value: value,
                headers: [RecordHeader(name: "big", value: [UInt8](repeating: 0, count: 200_000))],
                source: MessageSource(topic: "purchase.completed", partition: 1, offset: 9), timestampMilliseconds: 5)
            #expect(
                (try await h.processor.process(input))
                    == PurchaseOutcome.malformed(problem: "message is 1000000 bytes, over the 65536-byte limit"))
            let dead = try #require(h.publisher.records(on: h.topics.dlq).first)
            #expect(dead.value.isEmpty)
            #expect(Self.last("iap-value-omitted-bytes", in: dead) == "1000000")
            #expect(Self.last("iap-original-offset", in: dead) == "9")
            #expect(Self.last("big", in: dead) == nil)
        }
    }
}

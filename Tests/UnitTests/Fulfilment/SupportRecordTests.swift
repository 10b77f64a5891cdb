import Foundation
import Fulfilment
import IAPTestSupport
import Synchronization
import Testing

/// What the flow writes for people to read (duplicate counts, dead-letter rows) is written, and a ledger that refuses
/// it costs the record, never the purchase.
@Suite("Records for find, written by the flow")
struct SupportRecordTests {
    static func history(_ h: FlowHarness, _ seq: String) async throws -> PurchaseHistory {
        try await h.ledger.base.history(paymentSeq: seq)
    }

    @Test func duplicatesAreCountedWithTheGrantAndWithTheRejectedMessage() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("2001")
            _ = try await h.process("2001")
            _ = try await h.process("2001", offset: 1)
            _ = try await h.process("2001", offset: 2)
            h.payment("2002", user: "owner")
            _ = try await h.process("2002", user: "thief")
            _ = try await h.process("2002", user: "thief", offset: 3)
            #expect(try await Self.history(h, "2001").grantDuplicates == 2)
            #expect(try await Self.history(h, "2002").rejections.map(\.duplicates) == [1])
        }
    }

    @Test func aLedgerThatRefusesTheDuplicateCountStillAnswersDuplicate() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.payment("2003")
            _ = try await h.process("2003")
            h.ledger.refuseAt.withLock { $0 = .recordDuplicates }
            #expect(try await h.process("2003", offset: 1) == PurchaseOutcome.duplicate(paymentSeq: "2003"))
            #expect(try await Self.history(h, "2003").grantDuplicates == 0)
        }
    }

    @Test func aDeadLetterIsRecordedWithoutItsTokenAndALedgerThatRefusesItStillGetsTheRecordPublished() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            let input = FlowHarness.input(FlowHarness.message("2004"), offset: 7)
            try await h.processor.deadLetter(
                input, reason: .gamebaseUnavailable, error: "Gamebase timed out", attempts: 3)
            let recorded = try await Self.history(h, "2004").deadLetters
            #expect(recorded.count == 1)
            #expect(recorded.first?.reason == "gamebase_unavailable")
            #expect(recorded.first?.attempts == 3)
            #expect(recorded.first?.original?.offset == 7)
            #expect(recorded.first?.userId == "owner")
            #expect(recorded.first?.tokenHash?.count == 64)
            #expect(recorded.first?.valueBytes == FlowHarness.message("2004").count)

            h.ledger.refuseAt.withLock { $0 = .recordDeadLetter }
            try await h.processor.deadLetter(
                FlowHarness.input(FlowHarness.message("2005"), offset: 8), reason: .gamebaseUnavailable, error: "down",
                attempts: 2)
            #expect(h.publisher.records(on: h.topics.dlq).count == 2, "the dead-letter topic has it all the same")
            #expect(try await Self.history(h, "2005").deadLetters.isEmpty)
        }
    }

    @Test func aMalformedRecordsHostileIdentifiersAreNotKept() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            let userId = String(repeating: "u", count: 4_000)
            let value = Array(#"{"userId":"\#(userId)","paymentSeq":"2006"}"#.utf8)
            _ = try await h.processor.process(FlowHarness.input(value, offset: 9))
            let recorded = try await Self.history(h, "2006").deadLetters
            #expect(recorded.count == 1)
            #expect(recorded.first?.reason == "malformed_message")
            #expect(recorded.first?.userId == nil, "a 4,000-byte userId is the producer's, not kept")
        }
    }
}

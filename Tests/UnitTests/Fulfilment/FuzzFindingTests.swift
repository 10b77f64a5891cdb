import Foundation
import Fulfilment
import IAPTestSupport
import Synchronization
import Testing

/// What the fuzz targets (docs/fuzzing.md) found, each with the input that showed it (kept in
/// FuzzTesting/Corpus/FuzzPurchaseRecord/ under the finding's name, so the fuzz smoke replays it too).
@Suite("Fuzz findings", .timeLimit(.minutes(2)))
struct FuzzFindingTests {
    static func last(_ name: String, in record: OutboundRecord) -> String? {
        record.headers.last { $0.name == name }?.stringValue
    }

    static func purchaseRecord(value: String, headers: [RecordHeader]) -> PurchaseInput {
        PurchaseInput(
            key: Array("k".utf8), value: Array(value.utf8), headers: headers,
            source: MessageSource(topic: "purchase.completed", partition: 0, offset: 12),
            timestampMilliseconds: 1_700_000_000_123)
    }

    /// finding-forged-value-omitted-header: a purchase record carrying `iap-value-omitted-bytes: 12`, dead-lettered
    /// whole, kept the producer's header as the last of its name, so the dead-letter record said its value had been
    /// left out while it carried it.
    @Test func aProducersOmittedValueHeaderIsNeverTheLastWord() async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            let input = Self.purchaseRecord(
                value: "{}", headers: [RecordHeader(name: "iap-value-omitted-bytes", string: "12")])
            #expect((try await h.processor.process(input)) == PurchaseOutcome.malformed(problem: "userId is missing"))
            let dead = try #require(h.publisher.records(on: h.topics.dlq).first)
            #expect(dead.value == Array("{}".utf8))
            #expect(dead.headers.first == RecordHeader(name: "iap-value-omitted-bytes", string: "12"), "kept, as data")
            #expect(Self.last("iap-value-omitted-bytes", in: dead) == "0", "the worker's own says nothing was left out")
        }
    }

    /// finding-large-producer-iap-header: a record too large for the dead-letter topic because of a producer's own
    /// `iap-*` header (any name, a forged `iap-attempts` too) kept that header when its value was left out, was
    /// refused again, and `process` threw: the engine retries such a record for ever, and its partition stalled.
    @Test(arguments: ["iap-extra", "iap-attempts", "iap-original-topic"])
    func aProducersLargeIapHeaderNeverKeepsARecordFromTheDeadLetterTopic(name: String) async throws {
        try await FlowHarness.run { (h: FlowHarness) async throws in
            h.publisher.state.withLock { $0.maxRecordBytes = 5_120 }
            let input = Self.purchaseRecord(
                value: String(repeating: "x", count: 100),
                headers: [RecordHeader(name: name, string: String(repeating: "9", count: 7_000))])
            #expect((try await h.processor.process(input)) == PurchaseOutcome.malformed(problem: "message is not JSON"))
            let dead = try #require(h.publisher.records(on: h.topics.dlq).first)
            #expect(dead.value.isEmpty)
            #expect(
                dead.headers.map(\.name) == DeadLetterFactory.provenanceHeaders + [DeadLetterFactory.omittedValueHeader]
            )
            #expect(Self.last("iap-value-omitted-bytes", in: dead) == "100")
            #expect(Self.last("iap-attempts", in: dead) == "1")
            #expect(Self.last("iap-original-topic", in: dead) == "purchase.completed")
            #expect(Self.last("iap-original-offset", in: dead) == "12")
        }
    }
}

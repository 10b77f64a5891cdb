import Foundation
import Fulfilment
import IAPTestSupport
import InMemoryLedger
import Testing

@testable import Engine

/// The engine over a memory purchase source: intake, offsets and holds without a broker or a group join.
@Suite("The engine over a memory source", .timeLimit(.minutes(1)))
struct EngineSourceTests {
    @Test func aPurchaseFromTheSourceIsGrantedConsumedAndOnlyThenItsOffsetStored() async throws {
        let harness = EngineHarness()
        let engine = Task { try await harness.services.engine.run() }
        defer { engine.cancel() }
        try await EngineHarness.eventually("the engine started its source") { harness.source.isStarted }
        harness.source.assign([EngineHarness.partition])
        harness.source.append(harness.payment("e1"), to: EngineHarness.partition)
        try await EngineHarness.eventually("e1 was consumed and its offset stored") {
            try await harness.ledger.grant(paymentSeq: "e1")?.state == .consumed
                && harness.source.storedOffsets[EngineHarness.partition] == 1
        }
        #expect(harness.publisher.records(on: "iap.item-granted").count == 1)
        #expect(harness.gamebase.successfulConsumes("e1") == 1)
    }

    @Test func aPartitionAssignedWhileIntakeIsHeldStartsPausedAndResumesWithTheRest() async throws {
        let harness = EngineHarness()
        let engine = Task { try await harness.services.engine.run() }
        defer { engine.cancel() }
        try await EngineHarness.eventually("the engine started its source") { harness.source.isStarted }
        let first = SourcePartition(EngineHarness.topic, 0)
        let second = SourcePartition(EngineHarness.topic, 1)
        harness.source.assign([first])
        harness.services.intake.set(.gamebase, holding: true)
        #expect(harness.source.pausedPartitions == [first])
        // Assigned during the hold: paused from the start, or it would feed purchases to a Gamebase that is down.
        harness.source.assign([second])
        harness.source.append(harness.payment("e2"), to: second)
        try await EngineHarness.eventually("the new partition is paused") {
            harness.source.pausedPartitions == [first, second]
        }
        #expect(try await harness.ledger.grant(paymentSeq: "e2") == nil)
        harness.services.intake.set(.gamebase, holding: false)
        #expect(harness.source.pausedPartitions.isEmpty)
        try await EngineHarness.eventually("e2 was granted once intake resumed") {
            try await harness.ledger.grant(paymentSeq: "e2")?.state == .consumed
        }
    }

    @Test func aRevokedPartitionIsNotPausedWhenItComesBack() async throws {
        let harness = EngineHarness()
        let engine = Task { try await harness.services.engine.run() }
        defer { engine.cancel() }
        try await EngineHarness.eventually("the engine started its source") { harness.source.isStarted }
        harness.source.assign([EngineHarness.partition])
        harness.services.intake.set(.ledger, holding: true)
        harness.source.revoke([EngineHarness.partition])
        harness.services.intake.set(.ledger, holding: false)
        harness.source.assign([EngineHarness.partition])
        harness.source.append(harness.payment("e3"), to: EngineHarness.partition)
        try await EngineHarness.eventually("e3 was granted on the partition given back") {
            try await harness.ledger.grant(paymentSeq: "e3")?.state == .consumed
        }
        #expect(harness.source.pausedPartitions.isEmpty)
    }
}

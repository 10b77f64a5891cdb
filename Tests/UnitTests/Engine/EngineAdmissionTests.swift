import Foundation
import Fulfilment
import IAPTestSupport
import Testing

@testable import Engine

/// The engine's admission, tested on its state directly: assignment epochs, per-paymentSeq order, and the
/// weighted semaphore that bounds slots and bytes.
@Suite struct EngineAdmissionTests {
    static let partition = SourcePartition("purchase.completed", 0)

    static func work(offset: Int64, epoch: UInt64, paymentSeq: String? = "p", weight: Int = 10) -> Work {
        let input = PurchaseInput(
            key: nil, value: [],
            source: MessageSource(topic: partition.topic, partition: partition.partition, offset: offset),
            timestampMilliseconds: nil)
        return Work(
            input: input, parsed: PurchaseMessage.parse([]), partition: partition, epoch: epoch, paymentSeq: paymentSeq,
            weight: weight, admittedAt: .now)
    }

    static func isRun(_ admission: PurchaseEngine.Admission) -> Bool {
        if case .run = admission { return true }
        return false
    }

    @Test func aMessageFromAnEarlierAssignmentIsNeverAdmittedIntoALaterOne() {
        var state = EngineState()
        state.partitions[Self.partition] = EngineState.Partition(epoch: 1)
        // Offset 100 is taken from the buffer in assignment 1; the partition is revoked and assigned again (epoch 2),
        // and the new assignment starts again from the committed offset 90.
        state.partitions[Self.partition] = EngineState.Partition(epoch: 2)
        guard case .dropped = state.admit(Self.work(offset: 100, epoch: 1, paymentSeq: nil)) else {
            Issue.record("a message of assignment 1 was admitted into assignment 2")
            return
        }
        #expect(state.partitions[Self.partition]?.inFlight == 0)
        #expect(Self.isRun(state.admit(Self.work(offset: 90, epoch: 2, paymentSeq: nil))))
        // The watermark can only reach 91 through 90 itself: 100 never entered the tracker.
        #expect(state.partitions[Self.partition]?.tracker.finished(90) == 91)
    }

    @Test func nothingIsAdmittedIntoAPartitionBeingRevokedOrNotOwned() {
        var state = EngineState()
        #expect(!Self.isRun(state.admit(Self.work(offset: 1, epoch: 1))))
        state.partitions[Self.partition] = EngineState.Partition(epoch: 1, owned: false)
        #expect(!Self.isRun(state.admit(Self.work(offset: 1, epoch: 1))))
        #expect(state.totalInFlight == 0)
    }

    @Test func aSecondMessageWithTheSamePaymentSeqWaitsAndIsNotCountedBusy() {
        var state = EngineState()
        state.partitions[Self.partition] = EngineState.Partition(epoch: 1)
        #expect(Self.isRun(state.admit(Self.work(offset: 1, epoch: 1, paymentSeq: "same"))))
        guard case .queued = state.admit(Self.work(offset: 2, epoch: 1, paymentSeq: "same")) else {
            Issue.record("not queued")
            return
        }
        #expect(state.partitions[Self.partition]?.inFlight == 2)
        #expect(state.partitions[Self.partition]?.busy == 1, "a revoke waits for the running one only")
    }

    @Test func theWeightedSemaphoreBoundsBytesAndLetsAnOversizedRecordRunAlone() async {
        let bytes = AsyncSemaphore(100)
        await bytes.acquire(60)
        let secondIn = Shared(false)
        let second = Task {
            await bytes.acquire(60)
            secondIn.withLock { $0 = true }
        }
        try? await Task.sleep(for: .milliseconds(100))
        #expect(secondIn.value == false, "60 + 60 is over the 100 bytes")
        let thirdIn = Shared(false)
        let third = Task {
            await bytes.acquire(1_000)  // larger than the capacity: waits until nothing else is held, then runs alone
            thirdIn.withLock { $0 = true }
        }
        bytes.release(60)
        await second.value
        #expect(secondIn.value)
        try? await Task.sleep(for: .milliseconds(100))
        #expect(thirdIn.value == false, "the second record's 60 bytes are still held")
        bytes.release(60)
        await third.value
        #expect(thirdIn.value)
        bytes.release(1_000)
        await bytes.acquire(100)
        bytes.release(100)
    }
}

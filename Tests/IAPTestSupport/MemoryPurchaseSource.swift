import Foundation
import Fulfilment
import Synchronization

/// A consumer group's share of a topic, in memory: the engine's tests drive its rebalances and feed its partitions, and
/// read what it stored and committed — no broker, no group join.
///
/// Each partition is a log; a member fetches from its position, which an assignment sets to the committed offset (so
/// what was not committed is delivered again, as Kafka does). A revoke commits the stored offsets, a loss does not.
/// Paused partitions deliver nothing; a pause of a partition not assigned is ignored.
public final class MemoryPurchaseSource: PurchaseSource {
    fileprivate struct State {
        var logs: [SourcePartition: [SourcedRecord]] = [:]
        var assignment: [SourcePartition: UInt64] = [:]
        var positions: [SourcePartition: Int64] = [:]
        var stored: [SourcePartition: Int64] = [:]
        var committed: [SourcePartition: Int64] = [:]
        var paused: Set<SourcePartition> = []
        var lastEpoch: UInt64 = 0
        var handler: (@Sendable (SourceRebalance) -> Void)?
        var topic: String?
        var closed = false
        var waiter: CheckedContinuation<Void, Never>?
        var storeCalls = 0
        var failure: (any Error)?
    }
    private let state = Mutex(State())

    public init() {}

    // MARK: What a test does

    /// Appends a record to `partition`'s log; answers its offset.
    @discardableResult
    public func append(
        _ value: [UInt8], key: [UInt8]? = nil, headers: [RecordHeader] = [], to partition: SourcePartition,
        timestampMilliseconds: Int64? = nil, byteCount: Int? = nil
    ) -> Int64 {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            let offset = Int64(state.logs[partition, default: []].count)
            let input = PurchaseInput(
                key: key, value: value, headers: headers,
                source: MessageSource(topic: partition.topic, partition: partition.partition, offset: offset),
                timestampMilliseconds: timestampMilliseconds)
            state.logs[partition, default: []].append(
                SourcedRecord(input: input, assignmentEpoch: 0, byteCount: byteCount ?? value.count + (key?.count ?? 0))
            )
            return state.takeWaiter()
        }
        waiter?.resume()
        return Int64(state.withLock { $0.logs[partition]?.count ?? 0 }) - 1
    }

    /// Assigns `partitions` to this member: they are fetched from their committed offsets, each with a new epoch.
    /// The rebalance handler runs on the caller's thread, as on the consumer's poll thread.
    public func assign(_ partitions: [SourcePartition]) {
        let (handler, epochs, waiter) = state.withLock { state in
            var epochs: [SourcePartition: UInt64] = [:]
            for partition in partitions {
                state.lastEpoch += 1
                state.assignment[partition] = state.lastEpoch
                state.positions[partition] = state.committed[partition] ?? 0
                state.paused.remove(partition)
                epochs[partition] = state.lastEpoch
            }
            return (state.handler, epochs, state.takeWaiter())
        }
        handler?(.assigned(epochs))
        waiter?.resume()
    }

    /// Revokes `partitions`: the handler runs first (it may store offsets), then what is stored is committed.
    public func revoke(_ partitions: [SourcePartition]) {
        let handler = state.withLock { state in
            for partition in partitions {
                state.assignment[partition] = nil
                state.paused.remove(partition)
            }
            return state.handler
        }
        handler?(.revoking(partitions))
        state.withLock { state in
            for partition in partitions {
                if let offset = state.stored.removeValue(forKey: partition) { state.committed[partition] = offset }
            }
        }
    }

    /// Takes `partitions` away without a revoke: nothing is committed.
    public func lose(_ partitions: [SourcePartition]) {
        let handler = state.withLock { state in
            for partition in partitions {
                state.assignment[partition] = nil
                state.paused.remove(partition)
                state.stored[partition] = nil
            }
            return state.handler
        }
        handler?(.lost(partitions))
    }

    /// The offsets stored and not yet committed, by partition.
    public var storedOffsets: [SourcePartition: Int64] { state.withLock { $0.stored } }
    /// The committed offsets, by partition.
    public var committedOffsets: [SourcePartition: Int64] { state.withLock { $0.committed } }
    /// The stored offset if any, else the committed one: where a member would resume.
    public func resumePoint(_ partition: SourcePartition) -> Int64? {
        state.withLock { $0.stored[partition] ?? $0.committed[partition] }
    }
    public var pausedPartitions: Set<SourcePartition> { state.withLock { $0.paused } }
    public var isStarted: Bool { state.withLock { $0.handler != nil } }
    public var isClosed: Bool { state.withLock { $0.closed } }

    // MARK: PurchaseSource

    public func start(topic: String, onRebalance: @escaping @Sendable (SourceRebalance) -> Void) throws {
        state.withLock { state in
            state.topic = topic
            state.handler = onRebalance
        }
    }

    /// Makes the next read fail with `error`, as a consumer does on a fatal error.
    public func failNextBatch(with error: any Error) {
        let waiter = state.withLock { state in
            state.failure = error
            return state.waiter.take()
        }
        waiter?.resume()
    }

    public func nextBatch(limit: Int, byteLimit: Int) async throws -> [SourcedRecord] {
        while true {
            if let failure = state.withLock({ state -> (any Error)? in
                defer { state.failure = nil }
                return state.failure
            }) {
                throw failure
            }
            let batch: [SourcedRecord]? = state.withLock { state in
                if state.closed { return [] }
                var batch: [SourcedRecord] = []
                var bytes = 0
                for partition in state.assignment.keys.sorted() where !state.paused.contains(partition) {
                    let log = state.logs[partition] ?? []
                    var position = state.positions[partition] ?? 0
                    while position < log.count, batch.count < limit, batch.isEmpty || bytes < byteLimit {
                        var record = log[Int(position)]
                        record.assignmentEpoch = state.assignment[partition]!
                        bytes += record.byteCount
                        batch.append(record)
                        position += 1
                    }
                    state.positions[partition] = position
                }
                return batch.isEmpty ? nil : batch
            }
            if let batch { return batch }
            if Task.isCancelled { return [] }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.closed || state.hasFetchable || state.failure != nil { return true }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }

    public func storeOffsets(_ offsets: [SourcePartition: Int64]) throws {
        try state.withLock { state in
            state.storeCalls += 1
            for (partition, offset) in offsets {
                guard state.assignment[partition] != nil else {
                    throw MemorySourceError(description: "\(partition) is not assigned")
                }
                state.stored[partition] = offset
            }
        }
    }

    public var assignment: [SourcePartition] { state.withLock { $0.assignment.keys.sorted() } }

    public func pause(_ partitions: [SourcePartition]) {
        state.withLock { state in
            for partition in partitions where state.assignment[partition] != nil { state.paused.insert(partition) }
        }
    }

    public func resume(_ partitions: [SourcePartition]) {
        let waiter = state.withLock { state in
            state.paused.subtract(partitions)
            return state.takeWaiter()
        }
        waiter?.resume()
    }

    public func initiateClose() {
        let partitions = assignment
        revoke(partitions)
        let waiter = state.withLock { state in
            state.closed = true
            return state.waiter.take()
        }
        waiter?.resume()
    }

    public func close() async {
        if !isClosed { initiateClose() }
    }
}

extension MemoryPurchaseSource {
    fileprivate struct MemorySourceError: Error, CustomStringConvertible {
        var description: String
    }
}

extension MemoryPurchaseSource.State {
    var hasFetchable: Bool {
        assignment.keys.contains { partition in
            !paused.contains(partition) && (positions[partition] ?? 0) < Int64(logs[partition]?.count ?? 0)
        }
    }

    /// The waiting fetch, when there is something for it now.
    mutating func takeWaiter() -> CheckedContinuation<Void, Never>? {
        guard hasFetchable || closed else { return nil }
        return waiter.take()
    }
}

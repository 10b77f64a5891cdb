import Foundation

/// What ``LedgerStore/lookup(_:)`` found for one message: the grant of its paymentSeq and its own rejection.
public struct LedgerLookup: Sendable, Hashable {
    public var grant: GrantRecord?
    public var rejection: RejectionRecord?

    public init(grant: GrantRecord?, rejection: RejectionRecord?) {
        self.grant = grant
        self.rejection = rejection
    }
}

/// A grant and its outbox event, written together.
public struct GrantWrite: Sendable, Hashable {
    public var grant: GrantRecord
    public var event: OutboxEvent

    public init(grant: GrantRecord, event: OutboxEvent) {
        self.grant = grant
        self.event = event
    }
}

/// A rejection and its outbox event, written together.
public struct RejectionWrite: Sendable, Hashable {
    public var rejection: RejectionRecord
    public var event: OutboxEvent

    public init(rejection: RejectionRecord, event: OutboxEvent) {
        self.rejection = rejection
        self.event = event
    }
}

/// The outcome of a Consume call for a grant.
public struct ConsumeRecord: Sendable, Hashable {
    public var paymentSeq: String
    /// Consumed (or already consumed): `granted` → `consumed`. Otherwise a failed attempt is counted.
    public var consumed: Bool
    /// Gamebase's result code (0 or 5018 when consumed; nil for a transport failure).
    public var resultCode: Int?
    public var at: Date
    /// An event published before this outcome and not yet marked so: marked in the same transaction.
    public var publishedEventID: String?

    public init(paymentSeq: String, consumed: Bool, resultCode: Int?, at: Date, publishedEventID: String? = nil) {
        self.paymentSeq = paymentSeq
        self.consumed = consumed
        self.resultCode = resultCode
        self.at = at
        self.publishedEventID = publishedEventID
    }
}

/// An outbox event published at a time.
public struct PublishedEvent: Sendable, Hashable {
    public var id: String
    public var at: Date

    public init(id: String, at: Date) {
        self.id = id
        self.at = at
    }
}

/// Batches a store cannot do better than one operation at a time (fakes, wrappers): the single operations in turn.
extension LedgerStore {
    public func lookup(_ keys: [RejectionKey]) async throws -> [LedgerLookup] {
        var found: [LedgerLookup] = []
        found.reserveCapacity(keys.count)
        for key in keys {
            let (grant, rejection) = try await lookup(paymentSeq: key.paymentSeq, rejection: key)
            found.append(LedgerLookup(grant: grant, rejection: rejection))
        }
        return found
    }

    public func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult] {
        var results: [GrantInsertResult] = []
        for write in writes { results.append(try await insertGrant(write.grant, event: write.event)) }
        return results
    }

    public func insertRejections(_ writes: [RejectionWrite]) async throws -> [Bool] {
        var results: [Bool] = []
        for write in writes { results.append(try await insertRejection(write.rejection, event: write.event)) }
        return results
    }

    public func recordConsumes(_ records: [ConsumeRecord]) async throws -> [Bool] {
        var results: [Bool] = []
        for record in records {
            if record.consumed {
                results.append(
                    try await markConsumed(
                        paymentSeq: record.paymentSeq, resultCode: record.resultCode ?? 0, at: record.at,
                        publishedEventID: record.publishedEventID))
            } else {
                try await recordConsumeFailure(
                    paymentSeq: record.paymentSeq, resultCode: record.resultCode, at: record.at, publishedEventID: record.publishedEventID)
                results.append(false)
            }
        }
        return results
    }

    public func markPublished(_ events: [PublishedEvent]) async throws {
        for event in events { try await markPublished(eventID: event.id, at: event.at) }
    }
}

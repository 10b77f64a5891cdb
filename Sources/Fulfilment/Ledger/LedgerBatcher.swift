import Foundation

/// The ledger as the flow uses it under load: the calls of many purchases in flight become a few batch calls.
///
/// Lookups, grant and rejection inserts, Consume outcomes and published-event marks each go through a
/// ``Coalescer``: a call that finds its kind idle runs at once; calls that arrive while one runs wait and go
/// together into the next batch (one read, or one transaction). Every guarantee of the single calls holds — each
/// caller gets its own answer only once the transaction holding its write has committed — and the per-purchase
/// flow stays as it reads. Other calls pass through (``LedgerPassThrough``).
public struct LedgerBatcher: LedgerPassThrough {
    public let base: any LedgerStore
    private let lookups: Coalescer<RejectionKey, LedgerLookup>
    private let grants: Coalescer<GrantWrite, GrantInsertResult>
    private let rejectionWrites: Coalescer<RejectionWrite, Bool>
    private let consumes: Coalescer<ConsumeRecord, Bool>
    private let published: Coalescer<PublishedEvent, Void>
    private let duplicates: Coalescer<DuplicateNote, Void>

    /// A batch the database refused (one row's value, a deadlock, a constraint) is run again call by call, so that
    /// only the purchase that causes it fails; a ledger that is away or late fails the batch as it is.
    static let isolates: @Sendable (any Error) -> Bool = { error in
        guard let error = error as? LedgerError else { return false }
        return error.code == .query || error.code == .conflict
    }

    public init(_ base: any LedgerStore, maxBatch: Int = 512) {
        self.base = base
        lookups = Coalescer(maxBatch: maxBatch, isolates: Self.isolates) { try await base.lookup($0) }
        grants = Coalescer(maxBatch: maxBatch, isolates: Self.isolates) { try await base.insertGrants($0) }
        rejectionWrites = Coalescer(maxBatch: maxBatch, isolates: Self.isolates) { try await base.insertRejections($0) }
        consumes = Coalescer(maxBatch: maxBatch, isolates: Self.isolates) { try await base.recordConsumes($0) }
        published = Coalescer(maxBatch: maxBatch, isolates: Self.isolates) { events in
            try await base.markPublished(events)
            return Array(repeating: (), count: events.count)
        }
        duplicates = Coalescer(maxBatch: maxBatch, isolates: Self.isolates) { notes in
            try await base.recordDuplicates(notes)
            return Array(repeating: (), count: notes.count)
        }
    }

    // MARK: Coalesced

    public func lookup(paymentSeq: String, rejection key: RejectionKey) async throws -> (
        grant: GrantRecord?, rejection: RejectionRecord?
    ) {
        // The key's paymentSeq is the message's (the flow builds it so).
        let found = try await lookups.submit(key)
        return (found.grant, found.rejection)
    }

    public func lookup(_ keys: [RejectionKey]) async throws -> [LedgerLookup] { try await base.lookup(keys) }

    public func insertGrant(_ grant: GrantRecord, event: OutboxEvent) async throws -> GrantInsertResult {
        try await grants.submit(GrantWrite(grant: grant, event: event))
    }

    public func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult] { try await base.insertGrants(writes) }

    public func insertRejection(_ rejection: RejectionRecord, event: OutboxEvent) async throws -> Bool {
        try await rejectionWrites.submit(RejectionWrite(rejection: rejection, event: event))
    }

    public func insertRejections(_ writes: [RejectionWrite]) async throws -> [Bool] { try await base.insertRejections(writes) }

    public func markConsumed(paymentSeq: String, resultCode: Int, at date: Date) async throws -> Bool {
        try await consumes.submit(ConsumeRecord(paymentSeq: paymentSeq, consumed: true, resultCode: resultCode, at: date))
    }

    public func markConsumed(paymentSeq: String, resultCode: Int, at date: Date, publishedEventID: String?) async throws -> Bool {
        try await consumes.submit(
            ConsumeRecord(paymentSeq: paymentSeq, consumed: true, resultCode: resultCode, at: date, publishedEventID: publishedEventID))
    }

    public func recordConsumeFailure(paymentSeq: String, resultCode: Int?) async throws {
        _ = try await consumes.submit(ConsumeRecord(paymentSeq: paymentSeq, consumed: false, resultCode: resultCode, at: Date()))
    }

    public func recordConsumeFailure(paymentSeq: String, resultCode: Int?, at date: Date, publishedEventID: String?) async throws {
        _ = try await consumes.submit(
            ConsumeRecord(paymentSeq: paymentSeq, consumed: false, resultCode: resultCode, at: date, publishedEventID: publishedEventID))
    }

    public func recordConsumes(_ records: [ConsumeRecord]) async throws -> [Bool] { try await base.recordConsumes(records) }

    public func markPublished(eventID: String, at date: Date) async throws {
        try await published.submit(PublishedEvent(id: eventID, at: date))
    }

    public func markPublished(_ events: [PublishedEvent]) async throws { try await base.markPublished(events) }

    /// One purchase's note joins the others in flight; a list goes as it is.
    public func recordDuplicates(_ notes: [DuplicateNote]) async throws {
        guard notes.count == 1 else { return try await base.recordDuplicates(notes) }
        try await duplicates.submit(notes[0])
    }
}

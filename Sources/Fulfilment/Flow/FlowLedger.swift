import Foundation

/// The ledger as the flow uses it: one purchase's calls, gathered with those of the other purchases in flight into a
/// few batch calls of the purchases role (one read, or one transaction), each within the ledger's deadline. The one
/// place that batches.
///
/// Lookups, grant and rejection inserts, Consume outcomes, published-event marks and duplicate counts each go through a
/// ``Coalescer``: a call that finds its kind idle runs at once; calls that arrive while one runs wait and go together
/// into the next batch. Every guarantee of a single call holds — each caller gets its own answer only once the
/// transaction holding its write has committed — and the per-purchase flow stays as it reads.
public struct FlowLedger: Sendable {
    public let role: any PurchaseLedger
    public let deadline: LedgerDeadline
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

    public init(_ role: any PurchaseLedger, deadline: LedgerDeadline = LedgerDeadline(), maxBatch: Int = 512) {
        self.role = role
        self.deadline = deadline
        lookups = Coalescer(maxBatch: maxBatch, isolates: Self.isolates) { keys in
            try await deadline.run("lookup batch") { try await role.lookup(keys) }
        }
        grants = Coalescer(maxBatch: maxBatch, isolates: Self.isolates) { writes in
            try await deadline.run("grant batch") { try await role.insertGrants(writes) }
        }
        rejectionWrites = Coalescer(maxBatch: maxBatch, isolates: Self.isolates) { writes in
            try await deadline.run("rejection batch") { try await role.insertRejections(writes) }
        }
        consumes = Coalescer(maxBatch: maxBatch, isolates: Self.isolates) { records in
            try await deadline.run("consume batch") { try await role.recordConsumes(records) }
        }
        published = Coalescer(maxBatch: maxBatch, isolates: Self.isolates) { events in
            try await deadline.run("published batch") { try await role.markPublished(events) }
            return Array(repeating: (), count: events.count)
        }
        duplicates = Coalescer(maxBatch: maxBatch, isolates: Self.isolates) { notes in
            try await deadline.run("duplicate count") { try await role.recordDuplicates(notes) }
            return Array(repeating: (), count: notes.count)
        }
    }

    /// The grant of the message's paymentSeq and the message's own rejection (the key's paymentSeq is the message's).
    public func lookup(_ key: RejectionKey) async throws -> LedgerLookup {
        try await lookups.submit(key)
    }

    public func grant(paymentSeq: String) async throws -> GrantRecord? {
        try await deadline.run("grant lookup") { [role] in try await role.grant(paymentSeq: paymentSeq) }
    }

    public func event(id: String) async throws -> OutboxEvent? {
        try await deadline.run("event lookup") { [role] in try await role.event(id: id) }
    }

    public func insertGrant(_ grant: GrantRecord, event: OutboxEvent) async throws -> GrantInsertResult {
        try await grants.submit(GrantWrite(grant: grant, event: event))
    }

    public func insertRejection(_ rejection: RejectionRecord, event: OutboxEvent) async throws -> Bool {
        try await rejectionWrites.submit(RejectionWrite(rejection: rejection, event: event))
    }

    /// `granted` → `consumed` (first marking `publishedEventID` published, when given); `false` when the row was not
    /// `granted`.
    @discardableResult
    public func markConsumed(paymentSeq: String, resultCode: Int, at date: Date, publishedEventID: String?)
        async throws -> Bool
    {
        try await consumes.submit(
            ConsumeRecord(
                paymentSeq: paymentSeq, consumed: true, resultCode: resultCode, at: date,
                publishedEventID: publishedEventID))
    }

    /// Counts a failed Consume attempt (first marking `publishedEventID` published, when given).
    public func recordConsumeFailure(paymentSeq: String, resultCode: Int?, at date: Date, publishedEventID: String?)
        async throws
    {
        _ = try await consumes.submit(
            ConsumeRecord(
                paymentSeq: paymentSeq, consumed: false, resultCode: resultCode, at: date,
                publishedEventID: publishedEventID))
    }

    public func markPublished(eventID: String, at date: Date) async throws {
        try await published.submit(PublishedEvent(id: eventID, at: date))
    }

    /// One purchase's duplicate joins the others in flight.
    public func recordDuplicate(_ note: DuplicateNote) async throws {
        try await duplicates.submit(note)
    }

    public func recordDeadLetter(_ entry: DeadLetterEntry) async throws {
        try await deadline.run("dead letter record") { [role] in try await role.recordDeadLetter(entry) }
    }

    /// Sets a revoked grant aside (``PurchaseLedger/setAsideRevokedGrant(paymentSeq:at:)``): rare, never batched.
    public func setAsideRevokedGrant(paymentSeq: String, at date: Date) async throws -> Bool {
        try await deadline.run("set aside revoked grant") { [role] in
            try await role.setAsideRevokedGrant(paymentSeq: paymentSeq, at: date)
        }
    }
}

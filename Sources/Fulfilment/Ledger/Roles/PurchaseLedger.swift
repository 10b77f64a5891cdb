import Foundation

/// The ledger's role in the consume flow: grants (one per paymentSeq), rejections (one per judged message), the outbox
/// of events, and what a support agent reads later (duplicates, dead letters). Every state change is a guarded write, so
/// concurrent workers can never both grant.
///
/// Calls take many purchases at once (one read, or one transaction): the flow's purchases in flight are gathered into
/// them by ``FlowLedger``, the one place that batches. Single-purchase forms for tests and tools are in the extension
/// below; they are not requirements, so a store implements each operation once.
///
/// Every method throws ``LedgerError``.
public protocol PurchaseLedger: Sendable {
    /// For each message: the grant of its paymentSeq and the message's own rejection (both may exist), in one read;
    /// answers in the order of `keys`.
    func lookup(_ keys: [RejectionKey]) async throws -> [LedgerLookup]

    /// The grant of `paymentSeq`, if any.
    func grant(paymentSeq: String) async throws -> GrantRecord?

    /// An outbox event by its id.
    func event(id: String) async throws -> OutboxEvent?

    /// Writes each grant row and its outbox event, all in one transaction; answers in order. The unique `paymentSeq`
    /// settles races: the loser gets `.alreadyGranted` with the winner's row and writes nothing. Two grants of one
    /// paymentSeq in a batch: the first is inserted, the second answered `.alreadyGranted`.
    func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult]

    /// Writes each rejection and its outbox event, in one transaction; answers in order, `false` (and nothing
    /// written) where that message's rejection exists already.
    func insertRejections(_ writes: [RejectionWrite]) async throws -> [Bool]

    /// Consume outcomes, each with the event published before it (if any), in one transaction; answers in order (for a
    /// consumed one: whether the row went from `granted` to `consumed`; a failed attempt is counted and answers `false`).
    func recordConsumes(_ records: [ConsumeRecord]) async throws -> [Bool]

    /// Marks events published (and, for an item-granted event, its grant's `eventPublishedAt`), in one transaction.
    func markPublished(_ events: [PublishedEvent]) async throws

    /// Counts messages that arrived again after their purchase was decided, with the grant or with the rejection of
    /// the message they repeat (one transaction for all).
    func recordDuplicates(_ notes: [DuplicateNote]) async throws

    /// Records a dead letter published to the dead-letter topic.
    func recordDeadLetter(_ entry: DeadLetterEntry) async throws

    /// Sets a `granted` grant aside when a refund revokes it as a whole and no reversal undid it: Gamebase refused its
    /// Consume for good, so the sweeper stops retrying it and stops counting it as waiting (``SweepLedger``). `false`,
    /// and nothing written, when the grant is not revoked so (or not `granted`, or set aside already). A reversal of
    /// the refund takes it back (``RefundPlan/resumesConsume``).
    func setAsideRevokedGrant(paymentSeq: String, at date: Date) async throws -> Bool
}

/// One purchase at a time: each a batch of one.
extension PurchaseLedger {
    /// The grant of `key`'s paymentSeq and the rejection of that one message.
    public func lookup(_ key: RejectionKey) async throws -> LedgerLookup {
        try await lookup([key]).first ?? LedgerLookup(grant: nil, rejection: nil)
    }

    /// The rejection of one message, if any.
    public func rejection(_ key: RejectionKey) async throws -> RejectionRecord? {
        try await lookup([key]).first?.rejection
    }

    public func insertGrant(_ grant: GrantRecord, event: OutboxEvent) async throws -> GrantInsertResult {
        try await insertGrants([GrantWrite(grant: grant, event: event)])[0]
    }

    @discardableResult
    public func insertRejection(_ rejection: RejectionRecord, event: OutboxEvent) async throws -> Bool {
        try await insertRejections([RejectionWrite(rejection: rejection, event: event)])[0]
    }

    public func markPublished(eventID: String, at date: Date) async throws {
        try await markPublished([PublishedEvent(id: eventID, at: date)])
    }

    /// `granted` → `consumed`; `false` when the row was not `granted` (consumed already, or missing).
    @discardableResult
    public func markConsumed(paymentSeq: String, resultCode: Int, at date: Date, publishedEventID: String? = nil)
        async throws -> Bool
    {
        try await recordConsumes([
            ConsumeRecord(
                paymentSeq: paymentSeq, consumed: true, resultCode: resultCode, at: date,
                publishedEventID: publishedEventID)
        ])[0]
    }

    /// Counts a failed Consume attempt and keeps its result code (nil for a transport failure).
    public func recordConsumeFailure(
        paymentSeq: String, resultCode: Int?, at date: Date = Date(), publishedEventID: String? = nil
    ) async throws {
        _ = try await recordConsumes([
            ConsumeRecord(
                paymentSeq: paymentSeq, consumed: false, resultCode: resultCode, at: date,
                publishedEventID: publishedEventID)
        ])
    }
}

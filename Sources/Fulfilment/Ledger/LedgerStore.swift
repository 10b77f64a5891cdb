import Foundation

/// The ledger the consume flow keeps: grants (one per paymentSeq), rejections (one per judged message) and the
/// outbox of events (and, through ``ReconciliationLedger``, what the reconciler keeps). Every state change is a
/// guarded write, so concurrent workers can never both grant.
///
/// Every method throws ``LedgerError``.
public protocol LedgerStore: ReconciliationLedger {
    /// Runs the named migrations that have not run yet.
    func migrate() async throws

    func grant(paymentSeq: String) async throws -> GrantRecord?

    func rejection(_ key: RejectionKey) async throws -> RejectionRecord?

    /// The grant of `paymentSeq` and the rejection of one message (both may exist), read together.
    func lookup(paymentSeq: String, rejection key: RejectionKey) async throws -> (grant: GrantRecord?, rejection: RejectionRecord?)

    /// Writes the grant row and its outbox event in one transaction. The unique `paymentSeq` settles races:
    /// the loser gets `.alreadyGranted` with the winner's row and writes nothing.
    func insertGrant(_ grant: GrantRecord, event: OutboxEvent) async throws -> GrantInsertResult

    /// Writes the rejection and its outbox event in one transaction; `false` (and nothing written) when that
    /// message's rejection exists already.
    @discardableResult
    func insertRejection(_ rejection: RejectionRecord, event: OutboxEvent) async throws -> Bool

    func event(id: String) async throws -> OutboxEvent?

    /// Marks an event published (and, for an item-granted event, the grant's `eventPublishedAt`).
    func markPublished(eventID: String, at date: Date) async throws

    /// `granted` → `consumed`; `false` when the row was not `granted` (consumed already, or missing).
    @discardableResult
    func markConsumed(paymentSeq: String, resultCode: Int, at date: Date) async throws -> Bool

    /// Counts a failed Consume attempt and keeps its result code (nil for a transport failure).
    func recordConsumeFailure(paymentSeq: String, resultCode: Int?) async throws

    /// ``markConsumed(paymentSeq:resultCode:at:)``, first marking `publishedEventID` published when given (one
    /// round trip where the store can).
    @discardableResult
    func markConsumed(paymentSeq: String, resultCode: Int, at date: Date, publishedEventID: String?) async throws -> Bool

    /// ``recordConsumeFailure(paymentSeq:resultCode:)``, first marking `publishedEventID` published when given.
    func recordConsumeFailure(paymentSeq: String, resultCode: Int?, at date: Date, publishedEventID: String?) async throws

    /// Claims up to `limit` grants still `granted` since before `grantedBefore`, leasing them until `now + lease` so
    /// other workers' sweepers skip them.
    func claimUnconsumedGrants(grantedBefore: Date, limit: Int, lease: Duration, now: Date) async throws -> [GrantRecord]

    /// Claims up to `limit` events unpublished since before `createdBefore`, leased the same way.
    func claimUnpublishedEvents(createdBefore: Date, limit: Int, lease: Duration, now: Date) async throws -> [OutboxEvent]

    func rejections(paymentSeq: String) async throws -> [RejectionRecord]

    func events(paymentSeq: String) async throws -> [OutboxEvent]

    func stats() async throws -> LedgerStats

    /// Grants still waiting for Consume (cheap: a partial index); also the readiness probe of the ledger, so it
    /// fails when the ledger cannot take writes (PostgreSQL read-only) even though it answers.
    func countUnconsumed() async throws -> Int

    /// When the oldest grant still waiting for Consume was granted; `nil` when none waits.
    func oldestUnconsumedGrantedAt() async throws -> Date?

    // MARK: What a support agent reads (`iap-worker find`): duplicates, dead letters

    /// Counts messages that arrived again after their purchase was decided, with the grant or with the rejection of
    /// the message they repeat (one transaction for all).
    func recordDuplicates(_ notes: [DuplicateNote]) async throws

    /// Records a dead letter published to the dead-letter topic.
    func recordDeadLetter(_ entry: DeadLetterEntry) async throws

    /// Records what `reprocess` made of the dead letter at `location` (nothing when the ledger never recorded it).
    func recordReprocessOutcome(deadLetter location: RecordLocation, outcome: String, at date: Date) async throws

    // MARK: Batches: one read, or one transaction, for many purchases (see ``LedgerBatcher``)

    /// ``lookup(paymentSeq:rejection:)`` for many messages in one read; answers in the order of `keys`.
    func lookup(_ keys: [RejectionKey]) async throws -> [LedgerLookup]

    /// ``insertGrant(_:event:)`` for many grants in one transaction; answers in order. Two grants of one paymentSeq
    /// in a batch: the first is inserted, the second answered `.alreadyGranted`.
    func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult]

    /// ``insertRejection(_:event:)`` for many rejections in one transaction; answers in order.
    func insertRejections(_ writes: [RejectionWrite]) async throws -> [Bool]

    /// Consume outcomes (each with the event published before it, if any) in one transaction; answers in order
    /// (for a consumed one: whether the row went from `granted` to `consumed`).
    func recordConsumes(_ records: [ConsumeRecord]) async throws -> [Bool]

    /// ``markPublished(eventID:at:)`` for many events in one transaction.
    func markPublished(_ events: [PublishedEvent]) async throws

    /// Releases connections. The store must not be used afterwards.
    func close() async throws
}

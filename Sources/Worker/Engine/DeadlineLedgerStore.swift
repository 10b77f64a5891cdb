import Foundation
import Fulfilment
import Ledger

/// A ledger whose every call has a deadline: a database that stops answering makes calls fail with
/// `LedgerError(.unavailable)` after `limit`, never hang. Writes are idempotent (guarded inserts and updates), so a
/// call that timed out and still completes later does no harm.
public struct DeadlineLedgerStore: LedgerStore {
    public let base: any LedgerStore
    public let limit: Duration
    private let watchdog: DeadlineWatchdog

    public init(_ base: any LedgerStore, limit: Duration = .seconds(10)) {
        self.base = base
        self.limit = limit
        self.watchdog = DeadlineWatchdog()
    }

    func bounded<T: Sendable>(_ what: String, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        do {
            return try await watchdog.run(limit, what, operation)
        } catch let exceeded as DeadlineExceeded {
            throw LedgerError(code: .unavailable, message: "the ledger did not answer: \(exceeded)")
        }
    }

    public func migrate() async throws { try await base.migrate() }

    public func grant(paymentSeq: String) async throws -> GrantRecord? {
        try await bounded("grant lookup") { [base] in try await base.grant(paymentSeq: paymentSeq) }
    }

    public func rejection(_ key: RejectionKey) async throws -> RejectionRecord? {
        try await bounded("rejection lookup") { [base] in try await base.rejection(key) }
    }

    public func lookup(paymentSeq: String, rejection key: RejectionKey) async throws -> (
        grant: GrantRecord?, rejection: RejectionRecord?
    ) {
        let found = try await bounded("lookup") { [base] in
            let result = try await base.lookup(paymentSeq: paymentSeq, rejection: key)
            return LookupResult(grant: result.grant, rejection: result.rejection)
        }
        return (found.grant, found.rejection)
    }

    public func insertGrant(_ grant: GrantRecord, event: OutboxEvent) async throws -> GrantInsertResult {
        try await bounded("grant insert") { [base] in try await base.insertGrant(grant, event: event) }
    }

    public func insertRejection(_ rejection: RejectionRecord, event: OutboxEvent) async throws -> Bool {
        try await bounded("rejection insert") { [base] in try await base.insertRejection(rejection, event: event) }
    }

    public func event(id: String) async throws -> OutboxEvent? {
        try await bounded("event lookup") { [base] in try await base.event(id: id) }
    }

    public func markPublished(eventID: String, at date: Date) async throws {
        try await bounded("mark published") { [base] in try await base.markPublished(eventID: eventID, at: date) }
    }

    public func markConsumed(paymentSeq: String, resultCode: Int, at date: Date) async throws -> Bool {
        try await bounded("mark consumed") { [base] in
            try await base.markConsumed(paymentSeq: paymentSeq, resultCode: resultCode, at: date)
        }
    }

    public func markConsumed(paymentSeq: String, resultCode: Int, at date: Date, publishedEventID: String?) async throws -> Bool {
        try await bounded("mark consumed") { [base] in
            try await base.markConsumed(paymentSeq: paymentSeq, resultCode: resultCode, at: date, publishedEventID: publishedEventID)
        }
    }

    public func recordConsumeFailure(paymentSeq: String, resultCode: Int?) async throws {
        try await bounded("record consume failure") { [base] in
            try await base.recordConsumeFailure(paymentSeq: paymentSeq, resultCode: resultCode)
        }
    }

    public func recordConsumeFailure(paymentSeq: String, resultCode: Int?, at date: Date, publishedEventID: String?) async throws {
        try await bounded("record consume failure") { [base] in
            try await base.recordConsumeFailure(
                paymentSeq: paymentSeq, resultCode: resultCode, at: date, publishedEventID: publishedEventID)
        }
    }

    public func claimUnconsumedGrants(grantedBefore: Date, limit: Int, lease: Duration, now: Date) async throws -> [GrantRecord] {
        try await bounded("claim unconsumed grants") { [base] in
            try await base.claimUnconsumedGrants(grantedBefore: grantedBefore, limit: limit, lease: lease, now: now)
        }
    }

    public func claimUnpublishedEvents(createdBefore: Date, limit: Int, lease: Duration, now: Date) async throws -> [OutboxEvent] {
        try await bounded("claim unpublished events") { [base] in
            try await base.claimUnpublishedEvents(createdBefore: createdBefore, limit: limit, lease: lease, now: now)
        }
    }

    public func rejections(paymentSeq: String) async throws -> [RejectionRecord] {
        try await bounded("rejections lookup") { [base] in try await base.rejections(paymentSeq: paymentSeq) }
    }

    public func events(paymentSeq: String) async throws -> [OutboxEvent] {
        try await bounded("events lookup") { [base] in try await base.events(paymentSeq: paymentSeq) }
    }

    public func stats() async throws -> LedgerStats {
        try await bounded("stats") { [base] in try await base.stats() }
    }

    public func countUnconsumed() async throws -> Int {
        try await bounded("count unconsumed") { [base] in try await base.countUnconsumed() }
    }

    public func oldestUnconsumedGrantedAt() async throws -> Date? {
        try await bounded("oldest unconsumed grant") { [base] in try await base.oldestUnconsumedGrantedAt() }
    }

    public func lookup(_ keys: [RejectionKey]) async throws -> [LedgerLookup] {
        try await bounded("lookup batch") { [base] in try await base.lookup(keys) }
    }

    public func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult] {
        try await bounded("grant batch") { [base] in try await base.insertGrants(writes) }
    }

    public func insertRejections(_ writes: [RejectionWrite]) async throws -> [Bool] {
        try await bounded("rejection batch") { [base] in try await base.insertRejections(writes) }
    }

    public func recordConsumes(_ records: [ConsumeRecord]) async throws -> [Bool] {
        try await bounded("consume batch") { [base] in try await base.recordConsumes(records) }
    }

    public func markPublished(_ events: [PublishedEvent]) async throws {
        try await bounded("published batch") { [base] in try await base.markPublished(events) }
    }

    public func close() async throws { try await base.close() }

    public func recordDuplicates(_ notes: [DuplicateNote]) async throws {
        try await bounded("duplicate count") { [base] in try await base.recordDuplicates(notes) }
    }

    public func recordDeadLetter(_ entry: DeadLetterEntry) async throws {
        try await bounded("dead letter record") { [base] in try await base.recordDeadLetter(entry) }
    }

    public func recordReprocessOutcome(deadLetter location: RecordLocation, outcome: String, at date: Date) async throws {
        try await bounded("reprocess outcome") { [base] in
            try await base.recordReprocessOutcome(deadLetter: location, outcome: outcome, at: date)
        }
    }
}

/// A lookup's two answers, as one `Sendable` value.
private struct LookupResult: Sendable {
    var grant: GrantRecord?
    var rejection: RejectionRecord?
}

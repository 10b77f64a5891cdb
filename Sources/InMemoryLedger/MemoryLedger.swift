import Foundation
import Fulfilment
import Synchronization

/// The ledger without a database: every role over tables held in memory, with what the SQL stores do observably —
/// SQLite's behaviour where the two differ: times kept to the millisecond, identifiers compared by their bytes, guarded
/// state changes, leases, orders, limits and counts as their statements have them. The conformance suites
/// (`Tests/ConformanceTests`) run it beside SQLite and PostgreSQL, which keeps it true to them; the flow and engine tests and
/// the fuzz targets (`FuzzTesting/`) run on it.
///
/// Each call is one transaction: it runs under one lock over one ``State`` value, so concurrent calls see each other
/// whole, as the stores' transactions do. There is no database to refuse a value or go away, so no call fails; the
/// one ``LedgerError`` a store throws for a healthy database (a grant that conflicts and cannot be read) cannot arise.
///
/// - Important: Each instance is a ledger of its own, gone with its last reference; it is a test rig, never a backend
///   of the worker (`iap-worker` does not link this module).
public final class MemoryLedger:
    PurchaseLedger, SweepLedger, LedgerProbe, ReconciliationLedger, RetentionLedger, HistoryLedger, AdminLedger,
    RefundLedger
{
    let state = Mutex(State())

    public init() {}
}

// MARK: The purchases role

extension MemoryLedger {
    public func lookup(_ keys: [RejectionKey]) async throws -> [LedgerLookup] {
        state.withLock { state in
            keys.map { key in
                LedgerLookup(
                    grant: state.grants[BinaryText(key.paymentSeq)]?.record,
                    rejection: state.rejections[RejectionID(key)]?.record)
            }
        }
    }

    public func grant(paymentSeq: String) async throws -> GrantRecord? {
        state.withLock { $0.grants[BinaryText(paymentSeq)]?.record }
    }

    public func event(id: String) async throws -> OutboxEvent? {
        state.withLock { $0.outbox[BinaryText(id)]?.event }
    }

    public func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult] {
        state.withLock { state in writes.map { state.insertGrant($0.grant, event: $0.event) } }
    }

    public func insertRejections(_ writes: [RejectionWrite]) async throws -> [Bool] {
        state.withLock { state in writes.map { state.insertRejection($0.rejection, event: $0.event) } }
    }

    public func recordConsumes(_ records: [ConsumeRecord]) async throws -> [Bool] {
        state.withLock { state in
            records.map { record in
                if let id = record.publishedEventID { state.markPublished(id, at: record.at) }
                if record.consumed {
                    return state.markConsumed(record.paymentSeq, resultCode: record.resultCode ?? 0, at: record.at)
                }
                state.recordConsumeFailure(record.paymentSeq, resultCode: record.resultCode)
                return false
            }
        }
    }

    public func markPublished(_ events: [PublishedEvent]) async throws {
        state.withLock { state in
            for event in events { state.markPublished(event.id, at: event.at) }
        }
    }
}

// MARK: The sweep role

extension MemoryLedger {
    public func claimUnconsumedGrants(grantedBefore: Date, limit: Int, lease: Duration, now: Date) async throws
        -> [GrantRecord]
    {
        let before = grantedBefore.epochMilliseconds
        let nowMs = now.epochMilliseconds
        let until = nowMs + Int64(lease.components.seconds * 1000)
        let beyond = LeaseEnd.latest(now: nowMs, until: until)
        return state.withLock { state in
            let due = state.grants.filter { _, row in
                row.waitsForConsume && row.record.grantedAt.epochMilliseconds < before
                    && (row.sweepClaimedUntil.map { $0 < nowMs || $0 > beyond } ?? true)
            }
            .sorted { ($0.value.record.grantedAt, $0.value.row) < ($1.value.record.grantedAt, $1.value.row) }
            return limited(due, limit).map { key, row in
                state.grants[key]?.sweepClaimedUntil = until
                return row.record
            }
        }
    }

    public func claimUnpublishedEvents(createdBefore: Date, limit: Int, lease: Duration, now: Date) async throws
        -> [OutboxEvent]
    {
        let before = createdBefore.epochMilliseconds
        let nowMs = now.epochMilliseconds
        let until = nowMs + Int64(lease.components.seconds * 1000)
        let beyond = LeaseEnd.latest(now: nowMs, until: until)
        return state.withLock { state in
            let due = state.outbox.filter { _, row in
                row.event.publishedAt == nil && row.event.createdAt.epochMilliseconds < before
                    && (row.claimedUntil.map { $0 < nowMs || $0 > beyond } ?? true)
            }
            .sorted { ($0.value.event.createdAt, $0.value.row) < ($1.value.event.createdAt, $1.value.row) }
            return limited(due, limit).map { key, row in
                state.outbox[key]?.claimedUntil = until
                return row.event
            }
        }
    }

    public func countUnconsumed() async throws -> Int {
        state.withLock { $0.grants.values.count(where: \.waitsForConsume) }
    }

    public func oldestUnconsumedGrantedAt() async throws -> Date? {
        state.withLock { $0.grants.values.filter(\.waitsForConsume).map(\.record.grantedAt).min() }
    }

    public func countSetAside() async throws -> Int {
        state.withLock { $0.grants.values.count { $0.record.state == .granted && $0.consumeSetAsideAt != nil } }
    }

    public func resumeSetAsideGrants() async throws -> Int {
        state.withLock { state in
            var resumed = 0
            for (key, row) in state.grants where row.record.state == .granted && row.consumeSetAsideAt != nil {
                guard !state.revokedByStandingRefund(key) else { continue }
                state.grants[key]?.consumeSetAsideAt = nil
                resumed += 1
            }
            return resumed
        }
    }

    public func setAsideRevokedGrant(paymentSeq: String, at date: Date) async throws -> Bool {
        let key = BinaryText(paymentSeq)
        return state.withLock { state in
            guard let row = state.grants[key], row.waitsForConsume, state.revokedByStandingRefund(key) else {
                return false
            }
            state.grants[key]?.consumeSetAsideAt = date
            return true
        }
    }
}

// MARK: The probe (memory has no disk to fill)

extension MemoryLedger {
    public func probeWrite() async throws {}
    public func storageShortfall() -> LedgerError? { nil }
}

// MARK: The admin role (the dead letters' reprocess outcome is with them, in +History)

extension MemoryLedger {
    public func stats() async throws -> LedgerStats {
        state.withLock { state in
            let granted = state.grants.values.count { $0.record.state == .granted }
            var rejections: [String: Int] = [:]
            for row in state.rejections.values { rejections[row.record.reason, default: 0] += 1 }
            return LedgerStats(
                granted: granted, consumed: state.grants.count - granted, rejections: rejections,
                unpublishedEvents: state.outbox.values.count { $0.event.publishedAt == nil })
        }
    }

    public func rejections(paymentSeq: String) async throws -> [RejectionRecord] {
        state.withLock { $0.rejections(of: BinaryText(paymentSeq)).map(\.record) }
    }

    public func events(paymentSeq: String) async throws -> [OutboxEvent] {
        state.withLock { $0.events(of: BinaryText(paymentSeq)).map(\.event) }
    }
}

// MARK: The statements the roles share

extension MemoryLedger.State {
    /// `INSERT … ON CONFLICT (payment_seq) DO NOTHING`, then the event when the grant went in.
    mutating func insertGrant(_ grant: GrantRecord, event: OutboxEvent) -> GrantInsertResult {
        let key = BinaryText(grant.paymentSeq)
        if let existing = grants[key] { return .alreadyGranted(existing.record) }
        if let payment = StorePaymentKey(grant), let refund = pendingRefund(payment) {
            return .refunded(notificationId: refund)
        }
        grants[key] = MemoryLedger.GrantRow(record: grant.asStored, row: nextRow())
        insert(event)
        return .inserted
    }

    /// `INSERT … ON CONFLICT DO NOTHING` on the message's key, then the event when the rejection went in.
    mutating func insertRejection(_ rejection: RejectionRecord, event: OutboxEvent) -> Bool {
        let key = MemoryLedger.RejectionID(rejection.key)
        guard rejections[key] == nil else { return false }
        rejections[key] = MemoryLedger.RejectionRow(record: rejection.asStored, row: nextRow())
        insert(event)
        return true
    }

    /// `INSERT INTO outbox … ON CONFLICT (id) DO NOTHING`.
    mutating func insert(_ event: OutboxEvent) {
        let key = BinaryText(event.id)
        guard outbox[key] == nil else { return }
        outbox[key] = MemoryLedger.EventRow(event: event.asStored, row: nextRow())
    }

    /// The event published (once: a later mark keeps the first time), and an item-granted event's grant with it.
    mutating func markPublished(_ id: String, at date: Date) {
        let key = BinaryText(id)
        guard let row = outbox[key] else { return }
        let at = date.storedInMilliseconds
        if row.event.publishedAt == nil {
            outbox[key]?.event.publishedAt = at
            outbox[key]?.claimedUntil = nil
        }
        guard key.hasSuffix(":item-granted"), let paymentSeq = row.event.paymentSeq else { return }
        let grant = BinaryText(paymentSeq)
        if let existing = grants[grant], existing.record.eventPublishedAt == nil {
            grants[grant]?.record.eventPublishedAt = at
        }
    }

    /// `granted` → `consumed`, guarded by the state: `false` when the grant is missing or consumed already.
    mutating func markConsumed(_ paymentSeq: String, resultCode: Int, at date: Date) -> Bool {
        let key = BinaryText(paymentSeq)
        guard var row = grants[key], row.record.state == .granted else { return false }
        row.record.state = .consumed
        row.record.consumedAt = date.storedInMilliseconds
        row.record.lastResultCode = resultCode
        row.record.consumeAttempts += 1
        row.sweepClaimedUntil = nil
        grants[key] = row
        return true
    }

    /// Counts a failed attempt of a grant still `granted`, and keeps it as the stores' trigger does: in the slot of
    /// its number among the latest ``ConsumeAttempt/kept``, stamped by the ledger's own clock.
    mutating func recordConsumeFailure(_ paymentSeq: String, resultCode: Int?) {
        let key = BinaryText(paymentSeq)
        guard var row = grants[key], row.record.state == .granted else { return }
        row.record.consumeAttempts += 1
        row.record.lastResultCode = resultCode
        grants[key] = row
        let attempt = row.record.consumeAttempts
        consumeAttempts[key, default: [:]][attempt % ConsumeAttempt.kept] = ConsumeAttempt(
            attempt: attempt, resultCode: resultCode, at: Date().storedInMilliseconds)
    }

    /// `WHERE payment_seq = ? ORDER BY rejected_at_ms`.
    func rejections(of paymentSeq: BinaryText) -> [MemoryLedger.RejectionRow] {
        rejections.values.filter { BinaryText($0.record.key.paymentSeq) == paymentSeq }
            .sorted { ($0.record.rejectedAt, $0.row) < ($1.record.rejectedAt, $1.row) }
    }

    /// `WHERE payment_seq = ? ORDER BY created_at_ms, id`.
    func events(of paymentSeq: BinaryText) -> [MemoryLedger.EventRow] {
        outbox.values.filter { paymentSeq.matches($0.event.paymentSeq) }
            .sorted {
                ($0.event.createdAt, BinaryText($0.event.id)) < ($1.event.createdAt, BinaryText($1.event.id))
            }
    }
}

import Foundation
import Fulfilment

/// The memory ledger's tables: one value, changed only under ``MemoryLedger``'s lock, so each call is one
/// transaction. A row keeps what its SQL table keeps beside the record (a lease, a duplicate count) and its place in
/// insertion order, which breaks ties between rows of one millisecond as SQLite's `rowid` does.
extension MemoryLedger {
    struct State {
        var grants: [BinaryText: GrantRow] = [:]
        var rejections: [RejectionID: RejectionRow] = [:]
        var outbox: [BinaryText: EventRow] = [:]
        /// In `id` order (the `dead_letters` table's `AUTOINCREMENT` key).
        var deadLetters: [DeadLetterRow] = []
        /// The latest ``ConsumeAttempt/kept`` failed attempts of each grant, by slot (`attempt % kept`).
        var consumeAttempts: [BinaryText: [Int: ConsumeAttempt]] = [:]
        var reconcileUsers: [BinaryText: UserRow] = [:]
        var sightings: [BinaryText: SightingRow] = [:]
        /// `store_notifications`, by notification id, each with its place in insertion order.
        var notifications: [BinaryText: (record: StoreNotificationRecord, row: Int64)] = [:]
        /// `revocations` and `further_revocations`, by paymentSeq: each grant's, by number.
        var revocations: [BinaryText: [RevocationRecord]] = [:]
        /// `refused_notifications`, by body hash.
        var refusals: [BinaryText: (record: RefusedNotification, row: Int64)] = [:]
        /// `consumption_answers`, by notification id.
        var consumptionAnswers: [BinaryText: MemoryLedger.ConsumptionRow] = [:]
        /// `store_poll_marks`, by name.
        var pollMarks: [BinaryText: MemoryLedger.PollRow] = [:]
        private var lastRow: Int64 = 0

        /// The next row's place in insertion order.
        mutating func nextRow() -> Int64 {
            lastRow += 1
            return lastRow
        }
    }

    struct GrantRow {
        var record: GrantRecord
        var duplicates = 0
        var sweepClaimedUntil: Int64?
        /// Set aside: revoked by a refund, and Gamebase refused its Consume for good.
        var consumeSetAsideAt: Date?
        let row: Int64

        /// `granted` and not set aside.
        var waitsForConsume: Bool { record.state == .granted && consumeSetAsideAt == nil }
    }

    struct RejectionRow {
        var record: RejectionRecord
        var duplicates = 0
        let row: Int64
    }

    struct EventRow {
        var event: OutboxEvent
        var claimedUntil: Int64?
        let row: Int64
    }

    struct DeadLetterRow {
        let id: Int64
        var entry: DeadLetterEntry
    }

    /// A `reconcile_users` row: when the user is next due, and their latest activity (`nil` for a user claimed by
    /// `reconcile --user` and not seen active since).
    struct UserRow {
        var nextCheck: Int64
        var lastActive: Int64?
    }

    struct SightingRow {
        let userId: String
        let firstSeen: Int64
    }

    /// A rejection's primary key: `(payment_seq, user_id, token_hash)`.
    struct RejectionID: Hashable {
        let paymentSeq: BinaryText
        let userId: BinaryText
        let tokenHash: BinaryText

        init(_ key: RejectionKey) {
            paymentSeq = BinaryText(key.paymentSeq)
            userId = BinaryText(key.userId)
            tokenHash = BinaryText(key.tokenHash)
        }
    }
}

/// A text column as the stores compare it: by its UTF-8 bytes (SQLite's `BINARY` collation, PostgreSQL's `=`), so
/// canonically equivalent identifiers of other bytes stay apart, where `String`'s equality would merge them.
struct BinaryText: Hashable, Comparable, Sendable {
    let text: String

    init(_ text: String) { self.text = text }

    static func == (lhs: BinaryText, rhs: BinaryText) -> Bool { lhs.text.utf8.elementsEqual(rhs.text.utf8) }

    static func < (lhs: BinaryText, rhs: BinaryText) -> Bool {
        lhs.text.utf8.lexicographicallyPrecedes(rhs.text.utf8)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(text.utf8.count)
        for byte in text.utf8 { hasher.combine(byte) }
    }

    /// Whether the bytes end with `suffix`'s (an `id LIKE '%:item-granted'`).
    func hasSuffix(_ suffix: String) -> Bool {
        text.utf8.count >= suffix.utf8.count && text.utf8.suffix(suffix.utf8.count).elementsEqual(suffix.utf8)
    }
}

extension BinaryText {
    /// Whether `text` is this text byte for byte (`nil`, SQL's `NULL`, equals nothing).
    func matches(_ other: String?) -> Bool { other.map { BinaryText($0) == self } ?? false }
}

/// SQL's `LIMIT`: at most `limit` rows; SQLite reads a negative limit as none.
func limited<Rows: Collection>(_ rows: Rows, _ limit: Int) -> [Rows.Element] {
    limit < 0 ? Array(rows) : Array(rows.prefix(limit))
}

// MARK: Values as the stores keep them

extension Date {
    /// The time as a store reads it back: whole milliseconds since the epoch.
    var storedInMilliseconds: Date { Date(epochMilliseconds: epochMilliseconds) }
}

extension GrantRecord {
    var asStored: GrantRecord {
        var grant = self
        grant.grantedAt = grantedAt.storedInMilliseconds
        grant.consumedAt = consumedAt?.storedInMilliseconds
        grant.eventPublishedAt = eventPublishedAt?.storedInMilliseconds
        return grant
    }
}

extension RejectionRecord {
    var asStored: RejectionRecord {
        var rejection = self
        rejection.rejectedAt = rejectedAt.storedInMilliseconds
        // Five nullable columns: a verdict of nothing reads back as none.
        if verdict == PaymentVerdict() { rejection.verdict = nil }
        return rejection
    }
}

extension OutboxEvent {
    var asStored: OutboxEvent {
        var event = self
        event.createdAt = createdAt.storedInMilliseconds
        event.publishedAt = publishedAt?.storedInMilliseconds
        return event
    }
}

extension DeadLetterEntry {
    var asStored: DeadLetterEntry {
        var entry = self
        entry.failedAt = failedAt.storedInMilliseconds
        entry.reprocessedAt = reprocessedAt?.storedInMilliseconds
        return entry
    }
}

extension MemoryLedger.State {
    /// The grant of `key` is revoked as a whole by a refund no reversal undid (``RefundPlan``'s standing revocation).
    func revokedByStandingRefund(_ key: BinaryText) -> Bool {
        (revocations[key] ?? []).contains { !$0.isPartial && $0.reversedBy == nil }
    }
}

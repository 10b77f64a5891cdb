import Foundation
import Fulfilment
import Synchronization

/// What a support agent reads: duplicates counted with what they repeat, dead letters, and the read port behind
/// `iap-worker find`, as the stores' `+History` extensions answer them.
extension MemoryLedger {
    public func recordDuplicates(_ notes: [DuplicateNote]) async throws {
        state.withLock { state in
            for note in notes {
                if let key = note.rejection {
                    state.rejections[RejectionID(key)]?.duplicates.countOneMore()
                } else {
                    state.grants[BinaryText(note.paymentSeq)]?.duplicates.countOneMore()
                }
            }
        }
    }

    public func recordDeadLetter(_ entry: DeadLetterEntry) async throws {
        state.withLock { state in
            state.deadLetters.append(DeadLetterRow(id: state.nextRow(), entry: entry.asStored))
        }
    }

    public func recordReprocessOutcome(deadLetter location: RecordLocation, outcome: String, at date: Date) async throws
    {
        let topic = BinaryText(location.topic)
        state.withLock { state in
            for index in state.deadLetters.indices {
                let entry = state.deadLetters[index].entry
                guard topic.matches(entry.deadLetterTopic), entry.deadLetterPartition == location.partition,
                    entry.deadLetterOffset == location.offset
                else { continue }
                state.deadLetters[index].entry.reprocessOutcome = outcome
                state.deadLetters[index].entry.reprocessedAt = date.storedInMilliseconds
            }
        }
    }

    // MARK: The read port

    public func history(paymentSeq: String) async throws -> PurchaseHistory {
        let key = BinaryText(paymentSeq)
        return state.withLock { state in
            let grant = state.grants[key]
            return PurchaseHistory(
                paymentSeq: paymentSeq, grant: grant?.record, grantDuplicates: grant?.duplicates ?? 0,
                consumeSetAsideAt: grant?.consumeSetAsideAt,
                rejections: state.rejections(of: key).map {
                    RejectionHistory(record: $0.record, duplicates: $0.duplicates)
                },
                events: state.events(of: key).map {
                    EventSummary(
                        id: $0.event.id, topic: $0.event.topic, createdAt: $0.event.createdAt,
                        publishedAt: $0.event.publishedAt)
                },
                consumeAttempts: state.consumeAttempts[key, default: [:]].values.sorted { $0.attempt < $1.attempt },
                deadLetters: state.deadLetters.filter { key.matches($0.entry.paymentSeq) }.inFailureOrder,
                sighting: state.sightings[key].map {
                    ReconciliationSightingRecord(
                        paymentSeq: paymentSeq, userId: $0.userId, firstSeen: Date(epochMilliseconds: $0.firstSeen))
                })
        }
    }

    public func paymentSeqs(paymentId: String, limit: Int) async throws -> [String] {
        let paymentId = BinaryText(paymentId)
        return state.withLock { state in
            // Up to `limit` of each table's, in one set (SQL's `UNION`), in order.
            let grants = state.grants.values.filter { paymentId.matches($0.record.paymentId) }.sorted {
                $0.row < $1.row
            }
            let rejections = state.rejections.values.filter { paymentId.matches($0.record.verdict?.paymentId) }
                .sorted { $0.row < $1.row }
            let found = Set(
                limited(grants, limit).map { BinaryText($0.record.paymentSeq) }
                    + limited(rejections, limit).map { BinaryText($0.record.key.paymentSeq) })
            return limited(found.sorted(), limit).map(\.text)
        }
    }

    public func purchases(userId: String, before cursor: PurchaseCursor?, limit: Int) async throws
        -> [PurchaseReference]
    {
        let user = BinaryText(userId)
        let until = cursor?.firstSeen.epochMilliseconds ?? Int64.max
        let after = cursor?.paymentSeq.map(BinaryText.init)
        return state.withLock { state in
            // A purchase's place is when it first appeared, over all its rows (grant, rejections, dead letters with a
            // paymentSeq, sighting), so a page never skips one whose newest row is on another page.
            var firstSeen: [BinaryText: Int64] = [:]
            func saw(_ paymentSeq: String, at ms: Int64) {
                let key = BinaryText(paymentSeq)
                firstSeen[key] = min(firstSeen[key] ?? ms, ms)
            }
            for row in state.grants.values where user.matches(row.record.userId) {
                saw(row.record.paymentSeq, at: row.record.grantedAt.epochMilliseconds)
            }
            for row in state.rejections.values where user.matches(row.record.key.userId) {
                saw(row.record.key.paymentSeq, at: row.record.rejectedAt.epochMilliseconds)
            }
            for row in state.deadLetters where user.matches(row.entry.userId) {
                if let paymentSeq = row.entry.paymentSeq { saw(paymentSeq, at: row.entry.failedAt.epochMilliseconds) }
            }
            for (paymentSeq, sighting) in state.sightings where user.matches(sighting.userId) {
                saw(paymentSeq.text, at: sighting.firstSeen)
            }
            // After the cursor: first seen before its time, or at it with a greater paymentSeq (SQL's `> NULL` is
            // never true: a cursor without one is its time alone).
            let page = firstSeen.filter { seq, ms in
                guard ms == until, let after else { return ms < until }
                return seq > after
            }
            .sorted { ($1.value, $0.key) < ($0.value, $1.key) }
            return limited(page, limit).map {
                PurchaseReference(paymentSeq: $0.key.text, firstSeen: Date(epochMilliseconds: $0.value))
            }
        }
    }

    public func deadLetters(original source: MessageSource) async throws -> [DeadLetterEntry] {
        let topic = BinaryText(source.topic)
        return state.withLock { state in
            state.deadLetters.filter {
                guard let original = $0.entry.original else { return false }
                return topic.matches(original.topic) && original.partition == source.partition
                    && original.offset == source.offset
            }
            .inFailureOrder
        }
    }

    public func deadLetters(reason: String?, before cursor: DeadLetterCursor?, limit: Int) async throws
        -> [DeadLetterEntry]
    {
        let reason = reason.map(BinaryText.init)
        let until = cursor?.failedAt.epochMilliseconds ?? Int64.max
        let below = cursor?.ledgerID
        return state.withLock { state in
            // After the cursor: failed before its time, or at it with a smaller id (SQL's `< NULL` is never true: a
            // cursor without one is its time alone).
            let found = state.deadLetters.filter { row in
                let ms = row.entry.failedAt.epochMilliseconds
                let after = ms == until ? below.map { row.id < $0 } ?? false : ms < until
                return after && (reason?.matches(row.entry.reason) ?? true)
            }
            // `ORDER BY failed_at_ms DESC, id DESC`.
            return limited(found.inFailureOrder.reversed(), limit)
        }
    }
}

extension Array where Element == MemoryLedger.DeadLetterRow {
    /// `ORDER BY failed_at_ms, id`, each with its id.
    fileprivate var inFailureOrder: [DeadLetterEntry] {
        sorted { ($0.entry.failedAt, $0.id) < ($1.entry.failedAt, $1.id) }.map { row in
            var entry = row.entry
            entry.ledgerID = row.id
            return entry
        }
    }
}

extension Int {
    /// A duplicate counted in an `INTEGER` column that stops at its largest value.
    fileprivate mutating func countOneMore() {
        self = Swift.min(self + 1, Int(Int32.max))
    }
}

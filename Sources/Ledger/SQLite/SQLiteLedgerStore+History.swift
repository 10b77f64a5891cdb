import Foundation
import Fulfilment
import GRDB
import Wire

/// What a support agent reads on SQLite: duplicates counted with what they repeat, dead letters, and the read port
/// behind `iap-worker find` (every lookup by an index: paymentSeq, payment id, userId and time).
extension SQLiteLedgerStore {
    public func recordDuplicates(_ notes: [DuplicateNote]) async throws {
        guard !notes.isEmpty else { return }
        try await write { db in
            for note in notes {
                if let key = note.rejection {
                    try db.cachedStatement(
                        sql: """
                            UPDATE rejections SET duplicate_count = MIN(duplicate_count + 1, 2147483647)
                            WHERE payment_seq = ? AND user_id = ? AND token_hash = ?
                            """
                    ).run([.text(key.paymentSeq), .text(key.userId), .text(key.tokenHash)], in: db)
                } else {
                    try db.cachedStatement(
                        sql:
                            "UPDATE grants SET duplicate_count = MIN(duplicate_count + 1, 2147483647) WHERE payment_seq = ?"
                    ).run([.text(note.paymentSeq)], in: db)
                }
            }
        }
    }

    public func recordDeadLetter(_ entry: DeadLetterEntry) async throws {
        try await write { db in
            try db.cachedStatement(
                sql: """
                    INSERT INTO dead_letters (\(LedgerSchema.deadLetterColumns))
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: StatementArguments(Self.values(of: entry)))
        }
    }

    public func recordReprocessOutcome(deadLetter location: RecordLocation, outcome: String, at date: Date) async throws
    {
        try await write { db in
            try db.cachedStatement(
                sql: """
                    UPDATE dead_letters SET reprocess_outcome = ?, reprocessed_at_ms = ?
                    WHERE dlq_topic = ? AND dlq_partition = ? AND dlq_offset = ?
                    """
            ).execute(arguments: [
                outcome, date.epochMilliseconds, location.topic, Int64(location.partition), location.offset,
            ])
        }
    }

    // MARK: The read port

    public func history(paymentSeq: String) async throws -> PurchaseHistory {
        try await read { db in
            let grantRow = try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT \(LedgerSchema.grantColumns), duplicate_count FROM grants WHERE payment_seq = ?"),
                arguments: [paymentSeq])
            let rejections = try Row.fetchAll(
                db.cachedStatement(
                    sql:
                        "SELECT \(LedgerSchema.rejectionColumns), duplicate_count FROM rejections WHERE payment_seq = ? ORDER BY rejected_at_ms"
                ),
                arguments: [paymentSeq]
            ).map { RejectionHistory(record: Self.rejection(from: $0), duplicates: $0["duplicate_count"]) }
            let events = try Row.fetchAll(
                db.cachedStatement(
                    sql:
                        "SELECT id, topic, created_at_ms, published_at_ms FROM outbox WHERE payment_seq = ? ORDER BY created_at_ms, id"
                ),
                arguments: [paymentSeq]
            ).map {
                EventSummary(
                    id: $0["id"], topic: $0["topic"], createdAt: Date(epochMilliseconds: $0["created_at_ms"]),
                    publishedAt: ($0["published_at_ms"] as Int64?).map(Date.init(epochMilliseconds:)))
            }
            let attempts = try Row.fetchAll(
                db.cachedStatement(
                    sql:
                        "SELECT attempt, result_code, at_ms FROM consume_attempts WHERE payment_seq = ? ORDER BY attempt"
                ),
                arguments: [paymentSeq]
            ).map {
                ConsumeAttempt(
                    attempt: $0["attempt"], resultCode: $0["result_code"],
                    at: Date(epochMilliseconds: $0["at_ms"]))
            }
            let deadLetters = try Row.fetchAll(
                db.cachedStatement(
                    sql:
                        "SELECT id, \(LedgerSchema.deadLetterColumns) FROM dead_letters WHERE payment_seq = ? ORDER BY failed_at_ms, id"
                ),
                arguments: [paymentSeq]
            ).map(Self.deadLetter(from:))
            let sighting = try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT payment_seq, user_id, first_seen_ms FROM reconcile_sightings WHERE payment_seq = ?"),
                arguments: [paymentSeq]
            ).map {
                ReconciliationSightingRecord(
                    paymentSeq: $0["payment_seq"], userId: $0["user_id"],
                    firstSeen: Date(epochMilliseconds: $0["first_seen_ms"]))
            }
            return PurchaseHistory(
                paymentSeq: paymentSeq, grant: grantRow.map(Self.grant(from:)),
                grantDuplicates: grantRow?["duplicate_count"] ?? 0,
                consumeSetAsideAt: try grantRow.flatMap { _ in try Self.setAsideAt(paymentSeq, db) },
                rejections: rejections, events: events,
                consumeAttempts: attempts, deadLetters: deadLetters, sighting: sighting)
        }
    }

    /// When the grant was set aside; `nil` too on a ledger not migrated to 009 yet (`find` migrates nothing).
    static func setAsideAt(_ paymentSeq: String, _ db: Database) throws -> Date? {
        do {
            return try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT consume_set_aside_at_ms FROM grants WHERE payment_seq = ?"),
                arguments: [paymentSeq]
            ).map(Date.init(epochMilliseconds:))
        } catch let error as DatabaseError where Self.namesAMissingColumn(error) {
            return nil
        }
    }

    public func paymentSeqs(paymentId: String, limit: Int) async throws -> [String] {
        try await read { db in
            let rows = try String.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT payment_seq FROM (SELECT payment_seq FROM grants WHERE payment_id = ? LIMIT ?)
                        UNION
                        SELECT payment_seq FROM (SELECT payment_seq FROM rejections WHERE payment_id = ? LIMIT ?)
                        """),
                arguments: [paymentId, limit, paymentId, limit])
            return Array(rows.prefix(limit))
        }
    }

    public func purchases(userId: String, before cursor: PurchaseCursor?, limit: Int) async throws
        -> [PurchaseReference]
    {
        let until = cursor?.firstSeen.epochMilliseconds ?? Int64.max
        let after = cursor?.paymentSeq
        return try await read { db in
            // Every row of the user through each table's (user_id, time) index; a purchase's place is when it first
            // appeared, over all its rows, so a page never skips one whose newest row is on another page. After the
            // cursor: first seen before its time, or at it with a greater paymentSeq (`> NULL` is never true, so a
            // cursor without one is its time alone).
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT payment_seq, MIN(t) AS first_seen FROM (
                            SELECT payment_seq, granted_at_ms AS t FROM grants WHERE user_id = ?
                            UNION ALL
                            SELECT payment_seq, rejected_at_ms AS t FROM rejections WHERE user_id = ?
                            UNION ALL
                            SELECT payment_seq, failed_at_ms AS t FROM dead_letters WHERE user_id = ? AND payment_seq IS NOT NULL
                            UNION ALL
                            SELECT payment_seq, first_seen_ms AS t FROM reconcile_sightings WHERE user_id = ?
                        ) GROUP BY payment_seq HAVING MIN(t) < ? OR (MIN(t) = ? AND payment_seq > ?)
                        ORDER BY first_seen DESC, payment_seq LIMIT ?
                        """),
                arguments: [userId, userId, userId, userId, until, until, after, limit]
            ).map {
                PurchaseReference(paymentSeq: $0["payment_seq"], firstSeen: Date(epochMilliseconds: $0["first_seen"]))
            }
        }
    }

    public func deadLetters(original source: MessageSource) async throws -> [DeadLetterEntry] {
        try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT id, \(LedgerSchema.deadLetterColumns) FROM dead_letters
                        WHERE original_topic = ? AND original_partition = ? AND original_offset = ? ORDER BY failed_at_ms, id
                        """),
                arguments: [source.topic, Int64(source.partition), source.offset]
            ).map(Self.deadLetter(from:))
        }
    }

    public func deadLetters(reason: String?, before cursor: DeadLetterCursor?, limit: Int) async throws
        -> [DeadLetterEntry]
    {
        let until = cursor?.failedAt.epochMilliseconds ?? Int64.max
        let below = cursor?.ledgerID
        return try await read { db in
            // After the cursor: failed before its time, or at it with a smaller id (`< NULL` is never true, so a
            // cursor without one is its time alone). `failed_at_ms <= ?` keeps the failed_at indexes' range scan.
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT id, \(LedgerSchema.deadLetterColumns) FROM dead_letters
                        WHERE failed_at_ms <= ? AND (failed_at_ms < ? OR id < ?) AND (? IS NULL OR reason = ?)
                        ORDER BY failed_at_ms DESC, id DESC LIMIT ?
                        """),
                arguments: [until, until, below, reason, reason, limit]
            ).map(Self.deadLetter(from:))
        }
    }

    static func values(of entry: DeadLetterEntry) -> [(any DatabaseValueConvertible)?] {
        [
            entry.paymentSeq, entry.userId, entry.tokenHash, entry.reason, entry.error, entry.attempts,
            entry.deadLetterTopic, entry.deadLetterPartition.map { Int64($0) }, entry.deadLetterOffset,
            entry.original?.topic, entry.original.map { Int64($0.partition) }, entry.original?.offset,
            entry.originalTimestampMilliseconds, entry.failedAt.epochMilliseconds, entry.valueBytes, entry.valueOmitted,
            entry.reprocessOutcome, entry.reprocessedAt?.epochMilliseconds,
        ]
    }

    static func deadLetter(from row: Row) -> DeadLetterEntry {
        var original: MessageSource?
        if let topic: String = row["original_topic"] {
            original = MessageSource(
                topic: topic, partition: Int32(clamping: row["original_partition"] as Int64? ?? -1),
                offset: row["original_offset"] ?? -1)
        }
        return DeadLetterEntry(
            paymentSeq: row["payment_seq"], userId: row["user_id"], tokenHash: row["token_hash"], reason: row["reason"],
            error: row["error"], attempts: row["attempts"], deadLetterTopic: row["dlq_topic"],
            deadLetterPartition: (row["dlq_partition"] as Int64?).map { Int32(clamping: $0) },
            deadLetterOffset: row["dlq_offset"],
            original: original, originalTimestampMilliseconds: row["original_timestamp_ms"],
            failedAt: Date(epochMilliseconds: row["failed_at_ms"]), valueBytes: row["value_bytes"],
            valueOmitted: row["value_omitted"], reprocessOutcome: row["reprocess_outcome"],
            reprocessedAt: (row["reprocessed_at_ms"] as Int64?).map(Date.init(epochMilliseconds:)),
            ledgerID: row["id"])
    }
}

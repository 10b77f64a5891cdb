import Foundation
import Fulfilment
import PostgresNIO
import Wire

/// What a support agent reads on PostgreSQL: duplicates counted with what they repeat, dead letters, and the read
/// port behind `iap-worker find` (every lookup by an index: paymentSeq, payment id, userId and time).
extension PostgresLedgerStore {
    public func recordDuplicates(_ notes: [DuplicateNote]) async throws {
        guard !notes.isEmpty else { return }
        // Counts per row first: one statement must not update a row twice.
        var grants: [String: Int] = [:]
        var rejections: [RejectionKey: Int] = [:]
        for note in notes {
            if let key = note.rejection {
                rejections[key, default: 0] += 1
            } else {
                grants[note.paymentSeq, default: 0] += 1
            }
        }
        // In one transaction, rows in a fixed order: two instances counting the same rows never deadlock.
        let seqs = grants.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        let keys = rejections.keys.sorted {
            ($0.paymentSeq, $0.userId, $0.tokenHash) < ($1.paymentSeq, $1.userId, $1.tokenHash)
        }
        try await wrap {
            try await client.withTransaction(logger: logger) { connection in
                if !seqs.isEmpty {
                    let counts = seqs.map { Int64(grants[$0] ?? 0) }
                    try await connection.query(
                        """
                        UPDATE grants g SET duplicate_count = LEAST(g.duplicate_count::bigint + d.n, 2147483647)::integer
                        FROM unnest(\(seqs), \(counts)) AS d(payment_seq, n) WHERE g.payment_seq = d.payment_seq
                        """, logger: logger)
                }
                if !keys.isEmpty {
                    try await connection.query(
                        """
                        UPDATE rejections r SET duplicate_count = LEAST(r.duplicate_count::bigint + d.n, 2147483647)::integer
                        FROM unnest(\(keys.map(\.paymentSeq)), \(keys.map(\.userId)), \(keys.map(\.tokenHash)),
                            \(keys.map { Int64(rejections[$0] ?? 0) })) AS d(payment_seq, user_id, token_hash, n)
                        WHERE r.payment_seq = d.payment_seq AND r.user_id = d.user_id AND r.token_hash = d.token_hash
                        """, logger: logger)
                }
            }
        }
    }

    public func recordDeadLetter(_ entry: DeadLetterEntry) async throws {
        let e = entry
        try await wrap {
            try await client.query(
                """
                INSERT INTO dead_letters (\(unescaped: LedgerSchema.deadLetterColumns)) VALUES (
                    \(e.paymentSeq), \(e.userId), \(e.tokenHash), \(e.reason), \(e.error), \(Int32(clamping: e.attempts)),
                    \(e.deadLetterTopic), \(e.deadLetterPartition), \(e.deadLetterOffset), \(e.original?.topic),
                    \(e.original?.partition), \(e.original?.offset), \(e.originalTimestampMilliseconds),
                    \(e.failedAt.epochMilliseconds), \(Int32(clamping: e.valueBytes)), \(e.valueOmitted), \(e.reprocessOutcome),
                    \(e.reprocessedAt?.epochMilliseconds))
                """, logger: logger)
        }
    }

    public func recordReprocessOutcome(deadLetter location: RecordLocation, outcome: String, at date: Date) async throws
    {
        try await wrap {
            try await client.query(
                """
                UPDATE dead_letters SET reprocess_outcome = \(outcome), reprocessed_at_ms = \(date.epochMilliseconds)
                WHERE dlq_topic = \(location.topic) AND dlq_partition = \(location.partition) AND dlq_offset = \(location.offset)
                """, logger: logger)
        }
    }

    // MARK: The read port

    public func history(paymentSeq: String) async throws -> PurchaseHistory {
        try await wrap {
            var history = PurchaseHistory(paymentSeq: paymentSeq)
            for try await row in try await client.query(
                "SELECT \(unescaped: LedgerSchema.grantColumns), duplicate_count FROM grants WHERE payment_seq = \(paymentSeq)",
                logger: logger)
            {
                history.grant = try Self.grant(from: row)
                history.grantDuplicates = Int(try row.makeRandomAccess()["duplicate_count"].decode(Int32.self))
            }
            if history.grant != nil {
                // `nil` too on a ledger not migrated to 009 yet (`find` migrates nothing).
                do {
                    for try await setAside in try await client.query(
                        "SELECT consume_set_aside_at_ms FROM grants WHERE payment_seq = \(paymentSeq)", logger: logger
                    ).decode(Int64?.self) {
                        history.consumeSetAsideAt = setAside.map(Date.init(epochMilliseconds:))
                    }
                } catch  where Self.namesAMissingColumn(error) {
                    history.consumeSetAsideAt = nil
                }
            }
            for try await row in try await client.query(
                """
                SELECT \(unescaped: LedgerSchema.rejectionColumns), duplicate_count FROM rejections
                WHERE payment_seq = \(paymentSeq) ORDER BY rejected_at_ms
                """, logger: logger)
            {
                history.rejections.append(
                    RejectionHistory(
                        record: try Self.rejection(from: row),
                        duplicates: Int(try row.makeRandomAccess()["duplicate_count"].decode(Int32.self))))
            }
            for try await (id, topic, created, published) in try await client.query(
                """
                SELECT id, topic, created_at_ms, published_at_ms FROM outbox WHERE payment_seq = \(paymentSeq)
                ORDER BY created_at_ms, id
                """, logger: logger
            ).decode((String, String, Int64, Int64?).self) {
                history.events.append(
                    EventSummary(
                        id: id, topic: topic, createdAt: Date(epochMilliseconds: created),
                        publishedAt: published.map(Date.init(epochMilliseconds:))))
            }
            for try await (attempt, code, at) in try await client.query(
                """
                SELECT attempt, result_code, at_ms FROM consume_attempts WHERE payment_seq = \(paymentSeq)
                ORDER BY attempt
                """, logger: logger
            ).decode((Int32, Int32?, Int64).self) {
                history.consumeAttempts.append(
                    ConsumeAttempt(
                        attempt: Int(attempt), resultCode: code.map(Int.init),
                        at: Date(epochMilliseconds: at)))
            }
            for try await row in try await client.query(
                """
                SELECT id, \(unescaped: LedgerSchema.deadLetterColumns) FROM dead_letters WHERE payment_seq = \(paymentSeq)
                ORDER BY failed_at_ms, id
                """, logger: logger)
            {
                history.deadLetters.append(try Self.deadLetter(from: row))
            }
            for try await (seq, userId, firstSeen) in try await client.query(
                "SELECT payment_seq, user_id, first_seen_ms FROM reconcile_sightings WHERE payment_seq = \(paymentSeq)",
                logger: logger
            ).decode((String, String, Int64).self) {
                history.sighting = ReconciliationSightingRecord(
                    paymentSeq: seq, userId: userId, firstSeen: Date(epochMilliseconds: firstSeen))
            }
            return history
        }
    }

    public func paymentSeqs(paymentId: String, limit: Int) async throws -> [String] {
        try await wrap {
            var seqs: [String] = []
            for try await seq in try await client.query(
                """
                (SELECT payment_seq FROM grants WHERE payment_id = \(paymentId) LIMIT \(Int64(limit)))
                UNION
                (SELECT payment_seq FROM rejections WHERE payment_id = \(paymentId) LIMIT \(Int64(limit)))
                """, logger: logger
            ).decode(String.self) {
                seqs.append(seq)
            }
            return Array(seqs.prefix(limit))
        }
    }

    public func purchases(userId: String, before cursor: PurchaseCursor?, limit: Int) async throws
        -> [PurchaseReference]
    {
        let until = cursor?.firstSeen.epochMilliseconds ?? Int64.max
        let after = cursor?.paymentSeq
        let n = Int64(limit)
        return try await wrap {
            var refs: [PurchaseReference] = []
            // Every row of the user through each table's (user_id, time) index; a purchase's place is when it first
            // appeared, over all its rows, so a page never skips one whose newest row is on another page. After the
            // cursor: first seen before its time, or at it with a greater paymentSeq (`> NULL` is never true, so a
            // cursor without one is its time alone). PaymentSeqs compare by their bytes (`COLLATE "C"`), as on
            // SQLite, whatever the database's collation.
            for try await (seq, firstSeen) in try await client.query(
                """
                SELECT payment_seq, MIN(t) AS first_seen FROM (
                    SELECT payment_seq, granted_at_ms AS t FROM grants WHERE user_id = \(userId)
                    UNION ALL
                    SELECT payment_seq, rejected_at_ms FROM rejections WHERE user_id = \(userId)
                    UNION ALL
                    SELECT payment_seq, failed_at_ms FROM dead_letters WHERE user_id = \(userId) AND payment_seq IS NOT NULL
                    UNION ALL
                    SELECT payment_seq, first_seen_ms FROM reconcile_sightings WHERE user_id = \(userId)
                ) AS found GROUP BY payment_seq
                HAVING MIN(t) < \(until) OR (MIN(t) = \(until) AND payment_seq COLLATE "C" > \(after))
                ORDER BY first_seen DESC, payment_seq COLLATE "C" LIMIT \(n)
                """, logger: logger
            ).decode((String, Int64).self) {
                refs.append(PurchaseReference(paymentSeq: seq, firstSeen: Date(epochMilliseconds: firstSeen)))
            }
            return refs
        }
    }

    public func deadLetters(original source: MessageSource) async throws -> [DeadLetterEntry] {
        try await wrap {
            var entries: [DeadLetterEntry] = []
            for try await row in try await client.query(
                """
                SELECT id, \(unescaped: LedgerSchema.deadLetterColumns) FROM dead_letters
                WHERE original_topic = \(source.topic) AND original_partition = \(source.partition)
                  AND original_offset = \(source.offset)
                ORDER BY failed_at_ms, id
                """, logger: logger)
            {
                entries.append(try Self.deadLetter(from: row))
            }
            return entries
        }
    }

    public func deadLetters(reason: String?, before cursor: DeadLetterCursor?, limit: Int) async throws
        -> [DeadLetterEntry]
    {
        let until = cursor?.failedAt.epochMilliseconds ?? Int64.max
        let below = cursor?.ledgerID
        return try await wrap {
            var entries: [DeadLetterEntry] = []
            // After the cursor: failed before its time, or at it with a smaller id (`< NULL` is never true, so a
            // cursor without one is its time alone). `failed_at_ms <= …` keeps the failed_at indexes' range scan.
            for try await row in try await client.query(
                """
                SELECT id, \(unescaped: LedgerSchema.deadLetterColumns) FROM dead_letters
                WHERE failed_at_ms <= \(until) AND (failed_at_ms < \(until) OR id < \(below))
                  AND (\(reason)::text IS NULL OR reason = \(reason))
                ORDER BY failed_at_ms DESC, id DESC LIMIT \(Int64(limit))
                """, logger: logger)
            {
                entries.append(try Self.deadLetter(from: row))
            }
            return entries
        }
    }

    static func deadLetter(from row: PostgresRow) throws -> DeadLetterEntry {
        let r = row.makeRandomAccess()
        var original: MessageSource?
        if let topic = try r["original_topic"].decode(String?.self) {
            original = MessageSource(
                topic: topic, partition: try r["original_partition"].decode(Int32?.self) ?? -1,
                offset: try r["original_offset"].decode(Int64?.self) ?? -1)
        }
        return DeadLetterEntry(
            paymentSeq: try r["payment_seq"].decode(String?.self), userId: try r["user_id"].decode(String?.self),
            tokenHash: try r["token_hash"].decode(String?.self), reason: try r["reason"].decode(String.self),
            error: try r["error"].decode(String.self), attempts: Int(try r["attempts"].decode(Int32.self)),
            deadLetterTopic: try r["dlq_topic"].decode(String.self),
            deadLetterPartition: try r["dlq_partition"].decode(Int32?.self),
            deadLetterOffset: try r["dlq_offset"].decode(Int64?.self),
            original: original, originalTimestampMilliseconds: try r["original_timestamp_ms"].decode(Int64?.self),
            failedAt: Date(epochMilliseconds: try r["failed_at_ms"].decode(Int64.self)),
            valueBytes: Int(try r["value_bytes"].decode(Int32.self)),
            valueOmitted: try r["value_omitted"].decode(Bool.self),
            reprocessOutcome: try r["reprocess_outcome"].decode(String?.self),
            reprocessedAt: try r["reprocessed_at_ms"].decode(Int64?.self).map(Date.init(epochMilliseconds:)),
            ledgerID: try r["id"].decode(Int64.self))
    }
}

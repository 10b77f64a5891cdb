import Foundation
import Fulfilment
import GRDB
import Wire

/// The reconciler's tables on SQLite. One instance uses the file, so claims never compete; they still record when
/// each user is next due, so a restart does not check everyone again at once.
extension SQLiteLedgerStore {
    public func reconciliationUsers(activeSince: Date, dueAt: Date?, limit: Int) async throws -> [String] {
        let since = activeSince.epochMilliseconds
        guard let dueAt else { return try await allActiveUsers(since: since, limit: limit) }
        return try await read { db in
            try String.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT user_id FROM reconcile_users WHERE next_check_ms <= ? AND last_active_ms >= ?
                        ORDER BY next_check_ms, user_id LIMIT ?
                        """), arguments: [dueAt.epochMilliseconds, since, Int64(clamping: limit)])
        }
    }

    /// Every user active since `since` (`reconcile` without claims): read from the grants and rejections themselves.
    func allActiveUsers(since: Int64, limit: Int) async throws -> [String] {
        let reasons = ConsumeFailureReason.userConfirmingReasons
        return try await read { db in
            try String.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT c.user_id FROM (
                            SELECT user_id FROM grants WHERE granted_at_ms >= ?
                            UNION
                            SELECT user_id FROM rejections WHERE rejected_at_ms >= ? AND reason IN (\(Self.marks(reasons.count)))
                        ) AS c LEFT JOIN reconcile_users AS r ON r.user_id = c.user_id
                        ORDER BY COALESCE(r.next_check_ms, 0), c.user_id
                        LIMIT ?
                        """),
                arguments: StatementArguments([since, since]) + StatementArguments(reasons)
                    + StatementArguments([Int64(clamping: limit)]))
        }
    }

    /// Brings `reconcile_users` up to date with the grants and confirmed rejections written since the last scan
    /// (``ReconcileScan``), a chunk per write.
    public func refreshReconciliationUsers(activeSince: Date) async throws -> Bool {
        let since = activeSince.epochMilliseconds
        return try await ReconcileScan.catchUp { source, from in
            // Read before the write: its body may run twice (``SQLiteWriteBatcher/write(_:)``).
            let now = Date().epochMilliseconds
            return try await write { db in try Self.scanChunk(source, since: since, from: from, now: now, db) }
        }
    }

    /// One chunk of a source's rows from `from` (the first of a scan: from its mark) on; answers where the next
    /// chunk starts and whether the source is caught up.
    static func scanChunk(_ source: ReconcileScan.Source, since: Int64, from given: Int64?, now: Int64, _ db: Database)
        throws -> (next: Int64, caughtUp: Bool)
    {
        let mark = try Int64.fetchOne(
            db, sql: "SELECT value_ms FROM ledger_marks WHERE name = ?", arguments: [source.mark])
        let from = ReconcileScan.start(since: since, given: given, stored: mark, now: now)
        let filter = source.reasons.map { "AND reason IN (\(marks($0.count)))" } ?? ""
        let reasons = StatementArguments(source.reasons ?? [])
        let column = source.timeColumn
        let chunk =
            "SELECT \(column) AS t, user_id FROM \(source.table) WHERE \(column) >= ? \(filter) ORDER BY \(column) LIMIT ?"
        let arguments = StatementArguments([from]) + reasons + StatementArguments([Int64(ReconcileScan.chunkRows)])
        guard let summary = try Row.fetchOne(db, sql: "SELECT count(*), max(t) FROM (\(chunk))", arguments: arguments),
            let last = summary[1] as Int64?
        else {
            // Nothing since `from`: the next scan starts an overlap before now.
            let position = ReconcileScan.markWhenNothingFound(now: now)
            if position != mark {
                try db.execute(
                    sql: """
                        INSERT INTO ledger_marks (name, value_ms) VALUES (?, ?)
                        ON CONFLICT (name) DO UPDATE SET value_ms = excluded.value_ms
                        """, arguments: [source.mark, position])
            }
            return (from, true)
        }
        let full = (summary[0] as Int64) >= Int64(ReconcileScan.chunkRows)
        var next = last
        var rows = "(\(chunk))"
        var rowArguments = arguments
        if full, last == from {
            // A whole chunk of one millisecond: all of that millisecond, then past it.
            rows = "(SELECT \(column) AS t, user_id FROM \(source.table) WHERE \(column) = ? \(filter))"
            rowArguments = StatementArguments([from]) + reasons
            next = from + 1
        }
        // One statement for the chunk (`WHERE true`: SQLite's upsert after a SELECT needs a WHERE).
        try db.execute(
            sql: """
                INSERT INTO reconcile_users (user_id, next_check_ms, last_active_ms)
                SELECT user_id, min(t), max(t) FROM \(rows) WHERE true GROUP BY user_id
                ON CONFLICT (user_id) DO UPDATE SET last_active_ms = excluded.last_active_ms
                WHERE COALESCE(last_active_ms, 0) < excluded.last_active_ms
                """, arguments: rowArguments)
        try db.execute(
            sql: """
                INSERT INTO ledger_marks (name, value_ms) VALUES (?, ?)
                ON CONFLICT (name) DO UPDATE SET value_ms = excluded.value_ms
                """, arguments: [source.mark, ReconcileScan.mark(after: next, now: now)])
        return (next, !full)
    }

    public func claimReconciliationUsers(_ userIds: [String], now: Date, nextCheck: Date) async throws -> [String] {
        guard !userIds.isEmpty else { return [] }
        let users = Array(Set(userIds)).sorted()
        let marks = Array(repeating: "?", count: users.count).joined(separator: ", ")
        let nowMs = now.epochMilliseconds
        let next = nextCheck.epochMilliseconds
        return try await write { db in
            let rows = Array(repeating: "(?, 0)", count: users.count).joined(separator: ", ")
            try db.execute(
                sql:
                    "INSERT INTO reconcile_users (user_id, next_check_ms) VALUES \(rows) ON CONFLICT DO NOTHING",
                arguments: StatementArguments(users))
            return try String.fetchAll(
                db,
                sql: """
                    UPDATE reconcile_users SET next_check_ms = ?
                    WHERE user_id IN (\(marks)) AND next_check_ms <= ? RETURNING user_id
                    """,
                arguments: StatementArguments([next]) + StatementArguments(users) + StatementArguments([nowMs]))
        }
    }

    public func reconciliationSightings(_ payments: [ReconciliationSighting], now: Date, record: Bool) async throws
        -> [String: Date]
    {
        guard !payments.isEmpty else { return [:] }
        let seqs = payments.map(\.paymentSeq)
        let marks = Array(repeating: "?", count: seqs.count).joined(separator: ", ")
        let select = "SELECT payment_seq, first_seen_ms FROM reconcile_sightings WHERE payment_seq IN (\(marks))"
        let body: @Sendable (Database) throws -> [String: Date] = { db in
            if record {
                let nowMs = now.epochMilliseconds
                for payment in payments {
                    try db.cachedStatement(
                        sql: """
                            INSERT INTO reconcile_sightings (payment_seq, user_id, first_seen_ms) VALUES (?, ?, ?)
                            ON CONFLICT (payment_seq) DO NOTHING
                            """
                    ).execute(arguments: [payment.paymentSeq, payment.userId, nowMs])
                }
            }
            var seen: [String: Date] = [:]
            for row in try Row.fetchAll(db, sql: select, arguments: StatementArguments(seqs)) {
                seen[row["payment_seq"]] = Date(epochMilliseconds: row["first_seen_ms"])
            }
            return seen
        }
        return record ? try await write(body) : try await read(body)
    }

    public func forgetReconciliationSightings(paymentSeqs: [String]) async throws {
        guard !paymentSeqs.isEmpty else { return }
        let marks = Array(repeating: "?", count: paymentSeqs.count).joined(separator: ", ")
        try await write { db in
            try db.execute(
                sql: "DELETE FROM reconcile_sightings WHERE payment_seq IN (\(marks))",
                arguments: StatementArguments(paymentSeqs))
        }
    }

    public func pruneReconciliation(before: Date) async throws {
        let ms = before.epochMilliseconds
        try await write { db in
            try db.execute(
                sql:
                    "DELETE FROM reconcile_users WHERE COALESCE(last_active_ms, next_check_ms) < ?",
                arguments: [ms])
            try db.execute(sql: "DELETE FROM reconcile_sightings WHERE first_seen_ms < ?", arguments: [ms])
        }
    }
}

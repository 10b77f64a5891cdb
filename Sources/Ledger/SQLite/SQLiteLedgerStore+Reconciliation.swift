import Foundation
import Fulfilment
import GRDB

/// The reconciler's tables on SQLite. One instance uses the file, so claims never compete; they still record when
/// each user is next due, so a restart does not check everyone again at once.
extension SQLiteLedgerStore {
    public func reconciliationUsers(activeSince: Date, dueAt: Date?, limit: Int) async throws -> [String] {
        let since = activeSince.epochMilliseconds
        let due = dueAt?.epochMilliseconds ?? Int64.max
        let reasons = ConsumeFailureReason.userConfirmingReasons
        let marks = Array(repeating: "?", count: reasons.count).joined(separator: ", ")
        return try await read { db in
            let arguments =
                StatementArguments([since, since] as [Int64]) + StatementArguments(reasons)
                + StatementArguments([due, Int64(limit)] as [Int64])
            return try String.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT c.user_id FROM (
                            SELECT user_id FROM grants WHERE granted_at_ms >= ?
                            UNION
                            SELECT user_id FROM rejections WHERE rejected_at_ms >= ? AND reason IN (\(marks))
                        ) AS c LEFT JOIN reconcile_users AS r ON r.user_id = c.user_id
                        WHERE r.next_check_ms IS NULL OR r.next_check_ms <= ?
                        ORDER BY COALESCE(r.next_check_ms, 0), c.user_id
                        LIMIT ?
                        """), arguments: arguments)
        }
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
            try db.execute(sql: "DELETE FROM reconcile_users WHERE next_check_ms < ?", arguments: [ms])
            try db.execute(sql: "DELETE FROM reconcile_sightings WHERE first_seen_ms < ?", arguments: [ms])
        }
    }
}

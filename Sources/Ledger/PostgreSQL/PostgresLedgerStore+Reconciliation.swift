import Foundation
import Fulfilment
import PostgresNIO
import Wire

/// The reconciler's tables on PostgreSQL, shared by every instance. A user is claimed for a check with
/// `FOR UPDATE SKIP LOCKED`: instances claiming at the same moment split the users between them, never both take
/// one, and never wait for each other.
extension PostgresLedgerStore {
    public func reconciliationUsers(activeSince: Date, dueAt: Date?, limit: Int) async throws -> [String] {
        let since = activeSince.epochMilliseconds
        let limit = Int64(clamping: limit)
        guard let dueAt else { return try await allActiveUsers(since: since, limit: limit) }
        let due = dueAt.epochMilliseconds
        return try await wrap {
            let rows = try await client.query(
                """
                SELECT user_id FROM reconcile_users WHERE next_check_ms <= \(due) AND last_active_ms >= \(since)
                ORDER BY next_check_ms, user_id LIMIT \(limit)
                """, logger: logger)
            var users: [String] = []
            for try await user in rows.decode(String.self) { users.append(user) }
            return users
        }
    }

    /// Every user active since `since` (`reconcile` without claims): read from the grants and rejections themselves.
    func allActiveUsers(since: Int64, limit: Int64) async throws -> [String] {
        let reasons = ConsumeFailureReason.userConfirmingReasons
        return try await wrap {
            let rows = try await client.query(
                """
                SELECT c.user_id FROM (
                    SELECT user_id FROM grants WHERE granted_at_ms >= \(since)
                    UNION
                    SELECT user_id FROM rejections WHERE rejected_at_ms >= \(since) AND reason = ANY(\(reasons))
                ) AS c LEFT JOIN reconcile_users AS r ON r.user_id = c.user_id
                ORDER BY COALESCE(r.next_check_ms, 0), c.user_id
                LIMIT \(limit)
                """, logger: logger)
            var users: [String] = []
            for try await user in rows.decode(String.self) { users.append(user) }
            return users
        }
    }

    public func claimReconciliationUsers(_ userIds: [String], now: Date, nextCheck: Date) async throws -> [String] {
        guard !userIds.isEmpty else { return [] }
        // Sorted, so concurrent claims of overlapping sets take their row locks in one order (no deadlock).
        let users = Array(Set(userIds)).sorted()
        let nowMs = now.epochMilliseconds
        let next = nextCheck.epochMilliseconds
        return try await wrap {
            try await client.query(
                """
                INSERT INTO reconcile_users (user_id, next_check_ms)
                SELECT u, 0 FROM unnest(\(users)::text[]) AS u ORDER BY u
                ON CONFLICT (user_id) DO NOTHING
                """, logger: logger)
            let rows = try await client.query(
                """
                UPDATE reconcile_users SET next_check_ms = \(next)
                WHERE user_id IN (
                    SELECT user_id FROM reconcile_users
                    WHERE user_id = ANY(\(users)) AND next_check_ms <= \(nowMs)
                    ORDER BY user_id
                    FOR UPDATE SKIP LOCKED)
                RETURNING user_id
                """, logger: logger)
            var claimed: [String] = []
            for try await user in rows.decode(String.self) { claimed.append(user) }
            return claimed
        }
    }

    public func reconciliationSightings(_ payments: [ReconciliationSighting], now: Date, record: Bool) async throws
        -> [String: Date]
    {
        guard !payments.isEmpty else { return [:] }
        let sorted = payments.sorted { $0.paymentSeq < $1.paymentSeq }
        let seqs = sorted.map(\.paymentSeq)
        let users = sorted.map(\.userId)
        let nowMs = now.epochMilliseconds
        return try await wrap {
            if record {
                try await client.query(
                    """
                    INSERT INTO reconcile_sightings (payment_seq, user_id, first_seen_ms)
                    SELECT s, u, \(nowMs) FROM unnest(\(seqs)::text[], \(users)::text[]) AS t(s, u) ORDER BY s
                    ON CONFLICT (payment_seq) DO NOTHING
                    """, logger: logger)
            }
            let rows = try await client.query(
                "SELECT payment_seq, first_seen_ms FROM reconcile_sightings WHERE payment_seq = ANY(\(seqs))",
                logger: logger)
            var seen: [String: Date] = [:]
            for try await (seq, ms) in rows.decode((String, Int64).self) { seen[seq] = Date(epochMilliseconds: ms) }
            return seen
        }
    }

    public func forgetReconciliationSightings(paymentSeqs: [String]) async throws {
        guard !paymentSeqs.isEmpty else { return }
        try await wrap {
            try await client.query(
                "DELETE FROM reconcile_sightings WHERE payment_seq = ANY(\(paymentSeqs))", logger: logger)
        }
    }

    public func pruneReconciliation(before: Date) async throws {
        let ms = before.epochMilliseconds
        try await wrap {
            try await client.query(
                "DELETE FROM reconcile_users WHERE COALESCE(last_active_ms, next_check_ms) < \(ms)",
                logger: logger)
            try await client.query("DELETE FROM reconcile_sightings WHERE first_seen_ms < \(ms)", logger: logger)
        }
    }
}

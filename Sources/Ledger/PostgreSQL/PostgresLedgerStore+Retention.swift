import Foundation
import Fulfilment
import PostgresNIO
import Wire

/// Retention on the shared PostgreSQL ledger: each batch is one short transaction that first takes a
/// transaction-scoped advisory lock without waiting, so one instance prunes at a time and a crashed one holds
/// nothing (the lock ends with its transaction). Deleted rows' space is reused by autovacuum; nothing is rewritten.
/// Each delete repeats its conditions outside the subquery that picks the rows: a row updated between the pick and the
/// delete (a user active again, a duplicate counted) is judged again as it now is.
extension PostgresLedgerStore {
    /// The advisory lock of a pruning batch.
    static let pruneLockID: Int64 = 0x1A9_0003

    public func prune(_ rows: PrunableRows, before: Date, limit: Int) async throws -> Int? {
        let cutoff = before.epochMilliseconds
        let limit = Int64(max(1, limit))
        let statement: PostgresQuery
        switch rows {
        case .publishedOutbox:
            statement = """
                DELETE FROM outbox WHERE id IN (
                    SELECT id FROM outbox WHERE published_at_ms IS NOT NULL AND published_at_ms < \(cutoff)
                    ORDER BY published_at_ms LIMIT \(limit))
                  AND published_at_ms < \(cutoff)
                RETURNING 1
                """
        case .confirmedRejections:
            statement = """
                DELETE FROM rejections WHERE ctid = ANY(ARRAY(
                    SELECT ctid FROM rejections
                    WHERE rejected_at_ms < \(cutoff) AND reason = ANY(\(ConsumeFailureReason.userConfirmingReasons))
                    ORDER BY rejected_at_ms LIMIT \(limit)))
                  AND rejected_at_ms < \(cutoff)
                RETURNING 1
                """
        case .unconfirmedRejections:
            // The consume-failed event of a claim nobody confirmed goes with it, once published.
            statement = """
                WITH gone AS (
                    DELETE FROM rejections WHERE ctid = ANY(ARRAY(
                        SELECT ctid FROM rejections
                        WHERE rejected_at_ms < \(cutoff) AND reason = ANY(\(PrunableRows.unconfirmedReasons))
                        ORDER BY rejected_at_ms LIMIT \(limit)))
                      AND rejected_at_ms < \(cutoff)
                    RETURNING event_id
                ), events AS (
                    DELETE FROM outbox WHERE id IN (SELECT event_id FROM gone) AND published_at_ms IS NOT NULL
                )
                SELECT event_id FROM gone
                """
        case .deadLetters:
            statement = """
                DELETE FROM dead_letters WHERE id IN (
                    SELECT id FROM dead_letters WHERE failed_at_ms < \(cutoff) ORDER BY failed_at_ms LIMIT \(limit))
                  AND failed_at_ms < \(cutoff)
                RETURNING 1
                """
        case .malformedDeadLetters:
            statement = """
                DELETE FROM dead_letters WHERE id IN (
                    SELECT id FROM dead_letters
                    WHERE reason = \(ConsumeFailureReason.malformedMessage.rawValue) AND failed_at_ms < \(cutoff)
                    ORDER BY failed_at_ms LIMIT \(limit))
                  AND failed_at_ms < \(cutoff)
                RETURNING 1
                """
        case .reconcileUsers:
            statement = """
                DELETE FROM reconcile_users WHERE user_id IN (
                    SELECT user_id FROM reconcile_users
                    WHERE COALESCE(last_active_ms, next_check_ms) < \(cutoff)
                    ORDER BY next_check_ms LIMIT \(limit))
                  AND COALESCE(last_active_ms, next_check_ms) < \(cutoff)
                RETURNING 1
                """
        case .reconcileSightings:
            statement = """
                DELETE FROM reconcile_sightings WHERE payment_seq IN (
                    SELECT payment_seq FROM reconcile_sightings WHERE first_seen_ms < \(cutoff)
                    ORDER BY first_seen_ms LIMIT \(limit))
                  AND first_seen_ms < \(cutoff)
                RETURNING 1
                """
        case .otherNotifications:
            let (other, recorded) = (StoreNotification.Kind.other.rawValue, NotificationOutcome.recorded.rawValue)
            statement = """
                DELETE FROM store_notifications WHERE notification_id IN (
                    SELECT notification_id FROM store_notifications
                    WHERE kind = \(other) AND outcome = \(recorded) AND received_at_ms < \(cutoff)
                    ORDER BY received_at_ms LIMIT \(limit))
                  AND kind = \(other) AND outcome = \(recorded)
                RETURNING 1
                """
        case .refusedNotifications:
            statement = """
                DELETE FROM refused_notifications WHERE body_hash IN (
                    SELECT body_hash FROM refused_notifications WHERE last_received_at_ms < \(cutoff)
                    ORDER BY last_received_at_ms LIMIT \(limit))
                  AND last_received_at_ms < \(cutoff)
                RETURNING 1
                """
        }
        return try await wrap {
            try await client.withTransaction(logger: logger) { connection -> Int? in
                var locked = false
                for try await taken in try await connection.query(
                    "SELECT pg_try_advisory_xact_lock(\(Self.pruneLockID))", logger: logger
                ).decode(Bool.self) {
                    locked = taken
                }
                guard locked else { return nil }
                var count = 0
                for try await _ in try await connection.query(statement, logger: logger) { count += 1 }
                return count
            }
        }
    }

    public func countBoundCutoff(_ rows: PrunableRows, keeping: Int) async throws -> Date? {
        let keeping = Int64(max(0, keeping))
        let query: PostgresQuery
        switch rows {
        case .confirmedRejections, .unconfirmedRejections:
            let reasons =
                rows == .confirmedRejections
                ? ConsumeFailureReason.userConfirmingReasons : PrunableRows.unconfirmedReasons
            query = """
                SELECT rejected_at_ms FROM rejections WHERE reason = ANY(\(reasons))
                ORDER BY rejected_at_ms DESC OFFSET \(keeping) LIMIT 1
                """
        case .deadLetters:
            query = "SELECT failed_at_ms FROM dead_letters ORDER BY failed_at_ms DESC OFFSET \(keeping) LIMIT 1"
        case .malformedDeadLetters:
            query = """
                SELECT failed_at_ms FROM dead_letters WHERE reason = \(ConsumeFailureReason.malformedMessage.rawValue)
                ORDER BY failed_at_ms DESC OFFSET \(keeping) LIMIT 1
                """
        case .publishedOutbox:
            query = """
                SELECT published_at_ms FROM outbox WHERE published_at_ms IS NOT NULL
                ORDER BY published_at_ms DESC OFFSET \(keeping) LIMIT 1
                """
        case .refusedNotifications:
            query = """
                SELECT last_received_at_ms FROM refused_notifications
                ORDER BY last_received_at_ms DESC OFFSET \(keeping) LIMIT 1
                """
        case .otherNotifications:
            query = """
                SELECT received_at_ms FROM store_notifications
                WHERE kind = \(StoreNotification.Kind.other.rawValue) AND outcome = \(NotificationOutcome.recorded.rawValue)
                ORDER BY received_at_ms DESC OFFSET \(keeping) LIMIT 1
                """
        case .reconcileUsers, .reconcileSightings:
            return nil
        }
        return try await wrap {
            for try await ms in try await client.query(query, logger: logger).decode(Int64.self) {
                return Date(epochMilliseconds: ms)
            }
            return nil
        }
    }

    public func rowCounts() async throws -> [String: Int] {
        try await wrap {
            var counts = Dictionary(uniqueKeysWithValues: LedgerTables.all.map { ($0, 0) })
            for try await (table, live) in try await client.query(
                """
                SELECT relname::text, n_live_tup FROM pg_stat_user_tables
                WHERE schemaname = current_schema() AND relname = ANY(\(LedgerTables.all))
                """, logger: logger
            ).decode((String, Int64).self) {
                counts[table] = Int(live)
            }
            return counts
        }
    }

    public func reclaimSpace(pages: Int) async throws -> Int { 0 }
}

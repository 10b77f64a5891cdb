import Foundation
import Fulfilment
import GRDB
import Logging
import Wire

/// Retention on SQLite: each batch goes through the write batcher like the purchases' writes (one write of their
/// group commit: a batch of writes never waits behind a stream of others), and the pages the deletes free are given
/// back to the file system by incremental vacuum, a few hundred pages a step (``prepareIncrementalVacuum()`` converts
/// a ledger file made before it, once, at the daemon's start).
extension SQLiteLedgerStore {
    public func prune(_ rows: PrunableRows, before: Date, limit: Int) async throws -> Int? {
        let cutoff = before.epochMilliseconds
        let limit = Int64(max(1, limit))
        return try await write { db in
            switch rows {
            case .publishedOutbox:
                try db.execute(
                    sql: """
                        DELETE FROM outbox WHERE rowid IN (
                            SELECT rowid FROM outbox WHERE published_at_ms IS NOT NULL AND published_at_ms < ?
                            ORDER BY published_at_ms LIMIT ?)
                        """, arguments: [cutoff, limit])
                return db.changesCount
            case .confirmedRejections, .unconfirmedRejections:
                let reasons =
                    rows == .confirmedRejections
                    ? ConsumeFailureReason.userConfirmingReasons : PrunableRows.unconfirmedReasons
                let marks = Self.marks(reasons.count)
                let selected = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT rowid, event_id FROM rejections WHERE rejected_at_ms < ? AND reason IN (\(marks))
                        ORDER BY rejected_at_ms LIMIT ?
                        """,
                    arguments: StatementArguments([cutoff]) + StatementArguments(reasons) + StatementArguments([limit]))
                for row in selected {
                    try db.cachedStatement(sql: "DELETE FROM rejections WHERE rowid = ?").execute(arguments: [
                        row[0] as Int64
                    ])
                    if rows == .unconfirmedRejections {
                        // The consume-failed event of a claim nobody confirmed goes with it, once published.
                        try db.cachedStatement(sql: "DELETE FROM outbox WHERE id = ? AND published_at_ms IS NOT NULL")
                            .execute(arguments: [row[1] as String])
                    }
                }
                return selected.count
            case .deadLetters:
                try db.execute(
                    sql: """
                        DELETE FROM dead_letters WHERE id IN (
                            SELECT id FROM dead_letters WHERE failed_at_ms < ? ORDER BY failed_at_ms LIMIT ?)
                        """, arguments: [cutoff, limit])
                return db.changesCount
            case .malformedDeadLetters:
                try db.execute(
                    sql: """
                        DELETE FROM dead_letters WHERE id IN (
                            SELECT id FROM dead_letters WHERE reason = ? AND failed_at_ms < ?
                            ORDER BY failed_at_ms LIMIT ?)
                        """, arguments: [ConsumeFailureReason.malformedMessage.rawValue, cutoff, limit])
                return db.changesCount
            case .reconcileUsers:
                try db.execute(
                    sql: """
                        DELETE FROM reconcile_users WHERE user_id IN (
                            SELECT user_id FROM reconcile_users
                            WHERE COALESCE(last_active_ms, next_check_ms) < ?
                            ORDER BY next_check_ms LIMIT ?)
                        """, arguments: [cutoff, limit])
                return db.changesCount
            case .reconcileSightings:
                try db.execute(
                    sql: """
                        DELETE FROM reconcile_sightings WHERE payment_seq IN (
                            SELECT payment_seq FROM reconcile_sightings WHERE first_seen_ms < ?
                            ORDER BY first_seen_ms LIMIT ?)
                        """, arguments: [cutoff, limit])
                return db.changesCount
            case .otherNotifications:
                try db.execute(
                    sql: """
                        DELETE FROM store_notifications WHERE notification_id IN (
                            SELECT notification_id FROM store_notifications
                            WHERE kind = ? AND outcome = ? AND received_at_ms < ?
                            ORDER BY received_at_ms LIMIT ?)
                        """,
                    arguments: [
                        StoreNotification.Kind.other.rawValue, NotificationOutcome.recorded.rawValue, cutoff, limit,
                    ])
                return db.changesCount
            case .refusedNotifications:
                try db.execute(
                    sql: """
                        DELETE FROM refused_notifications WHERE body_hash IN (
                            SELECT body_hash FROM refused_notifications WHERE last_received_at_ms < ?
                            ORDER BY last_received_at_ms LIMIT ?)
                        """, arguments: [cutoff, limit])
                return db.changesCount
            }
        }
    }

    public func countBoundCutoff(_ rows: PrunableRows, keeping: Int) async throws -> Date? {
        let keeping = Int64(max(0, keeping))
        return try await read { db -> Date? in
            let ms: Int64?
            switch rows {
            case .confirmedRejections, .unconfirmedRejections:
                let reasons =
                    rows == .confirmedRejections
                    ? ConsumeFailureReason.userConfirmingReasons : PrunableRows.unconfirmedReasons
                ms = try Int64.fetchOne(
                    db,
                    sql: """
                        SELECT rejected_at_ms FROM rejections WHERE reason IN (\(Self.marks(reasons.count)))
                        ORDER BY rejected_at_ms DESC LIMIT 1 OFFSET ?
                        """, arguments: StatementArguments(reasons) + StatementArguments([keeping]))
            case .deadLetters:
                ms = try Int64.fetchOne(
                    db, sql: "SELECT failed_at_ms FROM dead_letters ORDER BY failed_at_ms DESC LIMIT 1 OFFSET ?",
                    arguments: [keeping])
            case .malformedDeadLetters:
                ms = try Int64.fetchOne(
                    db,
                    sql: """
                        SELECT failed_at_ms FROM dead_letters WHERE reason = ?
                        ORDER BY failed_at_ms DESC LIMIT 1 OFFSET ?
                        """, arguments: [ConsumeFailureReason.malformedMessage.rawValue, keeping])
            case .publishedOutbox:
                ms = try Int64.fetchOne(
                    db,
                    sql: """
                        SELECT published_at_ms FROM outbox WHERE published_at_ms IS NOT NULL
                        ORDER BY published_at_ms DESC LIMIT 1 OFFSET ?
                        """, arguments: [keeping])
            case .refusedNotifications:
                ms = try Int64.fetchOne(
                    db,
                    sql: """
                        SELECT last_received_at_ms FROM refused_notifications
                        ORDER BY last_received_at_ms DESC LIMIT 1 OFFSET ?
                        """, arguments: [keeping])
            case .otherNotifications:
                ms = try Int64.fetchOne(
                    db,
                    sql: """
                        SELECT received_at_ms FROM store_notifications WHERE kind = ? AND outcome = ?
                        ORDER BY received_at_ms DESC LIMIT 1 OFFSET ?
                        """,
                    arguments: [
                        StoreNotification.Kind.other.rawValue, NotificationOutcome.recorded.rawValue, keeping,
                    ])
            case .reconcileUsers, .reconcileSightings:
                ms = nil
            }
            return ms.map(Date.init(epochMilliseconds:))
        }
    }

    public func rowCounts() async throws -> [String: Int] {
        try await read { db in
            var counts: [String: Int] = [:]
            for table in LedgerTables.all {
                counts[table] = try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)") ?? 0
            }
            return counts
        }
    }

    public func reclaimSpace(pages: Int) async throws -> Int {
        let (freed, left) = try await write { db -> (Int, Int) in
            let free = try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
            guard free > 0, try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") == 2 else { return (0, free) }
            try db.execute(sql: "PRAGMA incremental_vacuum(\(max(1, pages)))")
            let left = try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
            return (free - left, left)
        }
        if freed > 0, left == 0 {
            // The file shrinks when a checkpoint has copied the log back (the daemon never closes the file, and the
            // automatic checkpoints may leave the last frames): one that waits for no reader.
            do {
                try await pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(PASSIVE)") }
            } catch {
                throw wrap(error)
            }
        }
        return freed
    }

    /// Makes the file give pages back as retention frees them: a new ledger is created so; one made before (no
    /// auto-vacuum) is rewritten once by `VACUUM` when ``convertsToIncrementalVacuum`` (the daemon's start), which
    /// takes about as long as copying the file and needs as much free space again (SQLite's temporary directory and
    /// the write-ahead log, truncated afterwards). Interrupted, it leaves the file as it was and runs at the next start.
    func prepareIncrementalVacuum() throws {
        try pool.writeWithoutTransaction { db in
            guard try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") != 2 else { return }
            let hasTables = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") ?? 0 > 0
            guard !hasTables || convertsToIncrementalVacuum else { return }
            if hasTables, let shortfall = conversionSpaceShortfall(db) {
                logger.warning(
                    "the ledger file is not converted to incremental vacuum: \(shortfall); it keeps its size and is tried again at the next start"
                )
                return
            }
            let started = ContinuousClock.now
            if hasTables {
                logger.notice(
                    "converting the ledger file to incremental vacuum, once: a VACUUM that takes about as long as copying the file"
                )
            }
            try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
            try db.execute(sql: "VACUUM")
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            if hasTables {
                logger.notice(
                    "ledger file converted to incremental vacuum",
                    metadata: ["ledger.duration": "\(ContinuousClock.now - started)"])
            }
        }
    }

    /// Why there is not room for `VACUUM`'s copies of the file (one in SQLite's temporary directory, one in the
    /// write-ahead log beside it), or `nil`.
    func conversionSpaceShortfall(_ db: Database) -> String? {
        let pages = (try? Int.fetchOne(db, sql: "PRAGMA page_count")) ?? 0
        let pageSize = (try? Int.fetchOne(db, sql: "PRAGMA page_size")) ?? 4_096
        let needed = Int64(pages) * Int64(pageSize)
        let environment = ProcessInfo.processInfo.environment
        let temporary = environment["SQLITE_TMPDIR"] ?? environment["TMPDIR"] ?? "/var/tmp"
        let directory = URL(fileURLWithPath: pool.path).deletingLastPathComponent().path
        var problems: [String] = []
        if let available = Self.freeBytes(inDirectory: directory), available < needed {
            problems.append("\(directory) has \(available) bytes free for a write-ahead log of \(needed)")
        }
        if let available = Self.freeBytes(inDirectory: temporary), available < needed {
            problems.append(
                "\(temporary) (SQLITE_TMPDIR, TMPDIR or /var/tmp) has \(available) bytes free for a copy of \(needed)")
        }
        return problems.isEmpty ? nil : problems.joined(separator: "; ")
    }

    /// A write transaction of its own, outside the purchases' group commits.
    func writeAlone<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do { return try await pool.write(body) } catch { throw wrap(error) }
    }

    static func marks(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }
}

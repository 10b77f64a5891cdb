import Foundation
import Fulfilment
import PostgresNIO

/// How `reconcile_users` is kept up to date on PostgreSQL (``ReconcileScan``): rows are read in the order their
/// transactions ended, not by their stamps. A grant's time is stamped by the worker's clock before its transaction
/// commits, so one stamped by a clock behind, or committed long after its stamp, becomes visible below any time a
/// scan could have moved past; its transaction id (`scan_xid`, the column's default) cannot: every transaction below
/// a snapshot's `xmin` has ended, so none can add a row there later.
///
/// Each scan reads from the source's mark (a transaction id, in `ledger_marks`) the rows of the lookback window in
/// transaction-id order, a chunk per transaction, and when caught up moves the mark to the `xmin` taken when the
/// refresh started: what was still running then is read again by the next refresh. No clock is involved. Rows
/// written before their table had the column (no transaction id) are read once, by time, from the start of the
/// window, before the first scan by transaction.
extension PostgresLedgerStore {
    /// Where a scan of one source has got to.
    enum ScanPosition: Sendable {
        /// Reading the window's rows by time, from this millisecond on: the first scan after the upgrade, for the
        /// rows written before `scan_xid` existed.
        case byTime(Int64)
        /// Reading rows by the transaction that wrote them, from this transaction id on.
        case byTransaction(Int64)
    }

    /// Brings `reconcile_users` up to date with the grants and confirmed rejections committed since the last scan
    /// (``ReconcileScan``), a chunk per transaction. Instances scanning at once only write the same rows twice (in
    /// user order, so their row locks never cross).
    public func refreshReconciliationUsers(activeSince: Date) async throws -> Bool {
        let since = activeSince.epochMilliseconds
        let horizon = try await wrap { try await transactionHorizon() }
        return try await ReconcileScan.catchUp { source, from in
            try await wrap { try await scanChunk(source, since: since, horizon: horizon, from: from) }
        }
    }

    /// The oldest transaction id still running: every transaction below it has ended, so no row can appear below it
    /// later.
    private func transactionHorizon() async throws -> Int64 {
        var horizon: Int64 = 0
        for try await xmin in try await client.query(
            "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint", logger: logger
        ).decode(Int64.self) {
            horizon = xmin
        }
        return horizon
    }

    /// One chunk of a source's rows, from its mark (`given` nil) or from where the last chunk got to, in one
    /// transaction with the mark it moves; answers where the next chunk starts and whether the source is caught up.
    private func scanChunk(_ source: ReconcileScan.Source, since: Int64, horizon: Int64, from given: ScanPosition?)
        async throws -> (next: ScanPosition, caughtUp: Bool)
    {
        try await client.withTransaction(logger: logger) { connection -> (next: ScanPosition, caughtUp: Bool) in
            let position: ScanPosition
            if let given {
                position = given
            } else {
                position = try await storedPosition(source, since: since, connection)
            }
            switch position {
            case .byTime(let from):
                return try await scanByTime(source, since: since, from: max(since, from), connection)
            case .byTransaction(let from):
                return try await scanByTransaction(source, since: since, horizon: horizon, from: from, connection)
            }
        }
    }

    /// Where a scan starts: the source's transaction mark; without one (the first scan since the upgrade), by time
    /// from where the first scan got to, or the start of the window. A mark ahead of every transaction id the server
    /// has given (the ledger restored into another cluster) is not trusted: every row with an id is read again.
    private func storedPosition(_ source: ReconcileScan.Source, since: Int64, _ connection: PostgresConnection)
        async throws -> ScanPosition
    {
        var stored: (transaction: Int64?, time: Int64?, next: Int64) = (nil, nil, 0)
        for try await row in try await connection.query(
            """
            SELECT (SELECT value_ms FROM ledger_marks WHERE name = \(source.transactionMark)),
                (SELECT value_ms FROM ledger_marks WHERE name = \(source.upgradeTimeMark)),
                pg_snapshot_xmax(pg_current_snapshot())::text::bigint
            """, logger: logger
        ).decode((Int64?, Int64?, Int64).self) {
            stored = row
        }
        guard let transaction = stored.transaction else { return .byTime(stored.time ?? since) }
        guard transaction <= stored.next else {
            logger.info("the reconciler's scan mark is ahead of the ledger's transactions; reading every row again")
            return .byTransaction(0)
        }
        return .byTransaction(transaction)
    }

    /// One chunk of the window's rows by time, from `from` on: the first scan after the upgrade. It is there for the
    /// rows written before their table had `scan_xid`, which are all committed and can no longer appear below
    /// `from`: the position needs no overlap. When it reaches the end, the scan goes on by transaction from the
    /// first one (rows written since the upgrade, read again, in the order they became visible).
    private func scanByTime(
        _ source: ReconcileScan.Source, since: Int64, from: Int64, _ connection: PostgresConnection
    ) async throws -> (next: ScanPosition, caughtUp: Bool) {
        let column = source.timeColumn
        let chunk = Int64(ReconcileScan.chunkRows)
        let (rows, last) = try await upsertUsers(
            source, since: since, position: column, condition: "\(column) >= $2", value: from, limit: chunk,
            connection)
        guard rows >= chunk, let last else {
            try await connection.query(
                """
                INSERT INTO ledger_marks (name, value_ms) VALUES (\(source.transactionMark), 0)
                ON CONFLICT (name) DO NOTHING
                """, logger: logger)
            try await connection.query(
                "DELETE FROM ledger_marks WHERE name = \(source.upgradeTimeMark)", logger: logger)
            return (.byTransaction(0), false)
        }
        var next = last
        if last == from {
            // A whole chunk of one millisecond: all of that millisecond, then past it.
            _ = try await upsertUsers(
                source, since: since, position: column, condition: "\(column) = $2", value: from, limit: nil,
                connection)
            next = from + 1
        }
        try await storeMark(source.upgradeTimeMark, next, connection)
        return (.byTime(next), false)
    }

    /// One chunk of the window's rows by the transaction that wrote them, from transaction `from` on. The mark moves
    /// no further than `horizon`: a transaction above it may still be running, its rows not yet visible. Caught up,
    /// it moves to `horizon` — everything below it was read (it had ended before this refresh started).
    private func scanByTransaction(
        _ source: ReconcileScan.Source, since: Int64, horizon: Int64, from: Int64, _ connection: PostgresConnection
    ) async throws -> (next: ScanPosition, caughtUp: Bool) {
        let chunk = Int64(ReconcileScan.chunkRows)
        let (rows, last) = try await upsertUsers(
            source, since: since, position: "scan_xid", condition: "scan_xid >= $2::text::xid8", value: from,
            limit: chunk, connection)
        let caughtUp = rows < chunk
        var next = last ?? from
        if !caughtUp, last == from {
            // A whole chunk written by one transaction (a batch of thousands): all of its rows, then past it.
            _ = try await upsertUsers(
                source, since: since, position: "scan_xid", condition: "scan_xid = $2::text::xid8", value: from,
                limit: nil, connection)
            next = from + 1
        }
        try await storeMark(source.transactionMark, caughtUp ? horizon : min(next, horizon), connection)
        return (.byTransaction(next), caughtUp)
    }

    /// Records the latest activity of the users of `source`'s rows in the window (`$1` is `since`) that `condition`
    /// selects (`$2` is `value`) — the first `limit` by `position` when given — in one statement; answers how many
    /// rows it read and the largest `position`.
    private func upsertUsers(
        _ source: ReconcileScan.Source, since: Int64, position: String, condition: String, value: Int64,
        limit: Int64?, _ connection: PostgresConnection
    ) async throws -> (rows: Int64, last: Int64?) {
        var bindings = PostgresBindings()
        bindings.append(since)
        bindings.append(value)
        var reasons = ""
        if let confirming = source.reasons {
            bindings.append(confirming)
            reasons = "AND reason = ANY($\(bindings.count))"
        }
        var order = ""
        if let limit {
            bindings.append(limit)
            order = "ORDER BY p LIMIT $\(bindings.count)"
        }
        let time = source.timeColumn
        var result: (rows: Int64, last: Int64?) = (0, nil)
        for try await row in try await connection.query(
            PostgresQuery(
                unsafeSQL: """
                    WITH chunk AS (
                        SELECT \(position) AS p, \(time) AS t, user_id FROM \(source.table)
                        WHERE \(condition) AND \(time) >= $1 \(reasons) \(order)
                    ), written AS (
                        INSERT INTO reconcile_users (user_id, next_check_ms, last_active_ms)
                        SELECT user_id, min(t), max(t) FROM chunk GROUP BY user_id ORDER BY user_id
                        ON CONFLICT (user_id) DO UPDATE SET last_active_ms = EXCLUDED.last_active_ms
                        WHERE COALESCE(reconcile_users.last_active_ms, 0) < EXCLUDED.last_active_ms
                        RETURNING 1
                    )
                    SELECT count(*), max(p::text::bigint) FROM chunk
                    """, binds: bindings), logger: logger
        ).decode((Int64, Int64?).self) {
            result = row
        }
        return result
    }

    private func storeMark(_ name: String, _ value: Int64, _ connection: PostgresConnection) async throws {
        try await connection.query(
            """
            INSERT INTO ledger_marks (name, value_ms) VALUES (\(name), \(value))
            ON CONFLICT (name) DO UPDATE SET value_ms = EXCLUDED.value_ms
            WHERE ledger_marks.value_ms IS DISTINCT FROM EXCLUDED.value_ms
            """, logger: logger)
    }
}

extension ReconcileScan.Source {
    /// PostgreSQL's position: the transaction id below which every row was read (in `value_ms`). A name of its own,
    /// so an older version's time mark beside it (a rolling upgrade) means nothing to it.
    var transactionMark: String { "\(mark)_xid" }
    /// How far the first scan after the upgrade got by time (milliseconds), until the transaction mark exists.
    var upgradeTimeMark: String { "\(mark)_upgrade_ms" }
}

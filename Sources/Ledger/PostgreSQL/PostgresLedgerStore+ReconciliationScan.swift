import Foundation
import Fulfilment
import PostgresNIO

/// How `reconcile_users` is kept up to date on PostgreSQL (``ReconcileScan``): rows are read by the transaction that
/// wrote them, not by their stamps. A grant's time is stamped by the worker's clock before its transaction commits, so
/// one stamped by a clock behind, or committed long after its stamp, becomes visible below any time a scan could have
/// moved past; its transaction id (`scan_xid`, the column's default) cannot: a snapshot of the cluster's transactions
/// (`pg_current_snapshot()`) says which ids below its `xmax` were still running, and every other one had ended.
///
/// A source's position (``TransactionScan``, in `ledger_marks`) is how far the scan got, `next`, and the transactions
/// below it that were still running when the scan passed them, `pending`. A refresh takes one snapshot at its start;
/// it reads the rows of the pending transactions that have ended since, then the rows from `next` on in transaction-id
/// order, a chunk per transaction, never past the snapshot's `xmax`; each chunk stores where it got to and adds to
/// `pending` the running transactions it passed. A transaction left open anywhere in the cluster (another database, a
/// session idle in transaction, an orphaned prepared transaction) stays in `pending` — one index lookup per refresh —
/// and holds nothing else back. No clock decides what is read: the window (`activeSince`, from the refreshing
/// instance's clock) only bounds the first scan by time after the upgrade. Rows written before their table had the column (no transaction
/// id) are read once, by time, from the start of the window, before the first scan by transaction.
extension PostgresLedgerStore {
    /// Where a scan of one source has got to.
    enum ScanPosition: Sendable {
        /// Reading the window's rows by time, from this millisecond on: the first scan after the upgrade, for the
        /// rows written before `scan_xid` existed.
        case byTime(Int64)
        /// Reading rows by the transaction that wrote them.
        case byTransaction(TransactionScan)
    }

    /// Brings `reconcile_users` up to date with the grants and confirmed rejections committed since the last scan
    /// (``ReconcileScan``), a chunk per transaction. Instances scanning at once only write the same rows twice (in
    /// user order, so their row locks never cross).
    public func refreshReconciliationUsers(activeSince: Date) async throws -> Bool {
        let since = activeSince.epochMilliseconds
        let snapshot = try await wrap { try await transactionSnapshot() }
        return try await ReconcileScan.catchUp { source, from in
            try await wrap { try await scanChunk(source, since: since, snapshot: snapshot, from: from) }
        }
    }

    /// The cluster's transactions now: every id below `xmax` had been given out, and all but the `running` ones had
    /// ended (their rows visible to any later statement).
    private func transactionSnapshot() async throws -> TransactionSnapshot {
        var snapshot = TransactionSnapshot(xmax: 0, running: [])
        var inRecovery = false
        for try await (xmax, running, recovery, slots) in try await client.query(
            """
            SELECT pg_snapshot_xmax(s)::text::bigint, ARRAY(SELECT x::text::bigint FROM pg_snapshot_xip(s) AS x),
                pg_is_in_recovery(),
                current_setting('max_connections')::bigint + current_setting('max_prepared_transactions')::bigint
            FROM pg_current_snapshot() AS s
            """, logger: logger
        ).decode((Int64, [Int64], Bool, Int64).self) {
            snapshot = TransactionSnapshot(
                xmax: xmax, running: Set(running),
                pendingLimit: max(TransactionScan.pendingLimit, Int(clamping: slots) * 2))
            inRecovery = recovery
        }
        // A standby's snapshot lists no running transaction of the primary (they are in its subxip, which
        // pg_current_snapshot() does not copy): passing them as ended would lose their rows.
        guard !inRecovery else {
            throw LedgerError(
                code: .query,
                message: "the reconciler's scan reached a standby (a read-only replica): it must read from the "
                    + "primary; point ledger.url at the primary, not a proxy that sends reads to replicas")
        }
        return snapshot
    }

    /// One chunk of a source's rows, from its mark (`given` nil) or from where the last chunk got to, in one
    /// transaction with the mark it moves; answers where the next chunk starts and whether the source is caught up.
    private func scanChunk(
        _ source: ReconcileScan.Source, since: Int64, snapshot: TransactionSnapshot, from given: ScanPosition?
    ) async throws -> (next: ScanPosition, caughtUp: Bool) {
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
            case .byTransaction(let scan):
                return try await scanByTransaction(source, since: since, snapshot: snapshot, from: scan, connection)
            }
        }
    }

    /// Where a scan starts: the source's transaction mark; without one (the first scan since the upgrade), by time
    /// from where the first scan got to, or the start of the window. A mark ahead of every transaction id the server
    /// has given (the ledger restored into another cluster) is not trusted: every row with an id is read again.
    private func storedPosition(_ source: ReconcileScan.Source, since: Int64, _ connection: PostgresConnection)
        async throws -> ScanPosition
    {
        var stored: (transaction: Int64?, pending: [Int64]?, time: Int64?, next: Int64) = (nil, nil, nil, 0)
        for try await row in try await connection.query(
            """
            SELECT m.value_ms, m.pending_xids,
                (SELECT value_ms FROM ledger_marks WHERE name = \(source.upgradeTimeMark)),
                pg_snapshot_xmax(pg_current_snapshot())::text::bigint
            FROM (SELECT 1) AS one LEFT JOIN ledger_marks AS m ON m.name = \(source.transactionMark)
            """, logger: logger
        ).decode((Int64?, [Int64]?, Int64?, Int64).self) {
            stored = row
        }
        guard let transaction = stored.transaction else { return .byTime(stored.time ?? since) }
        guard transaction <= stored.next else {
            // Restored into a younger cluster: its rows keep their old, higher ids, which this cluster's scan would
            // reach only when its own ids do. The window is read again by time, then by transaction from the start.
            logger.info("the reconciler's scan mark is ahead of the ledger's transactions; reading the window again")
            try await connection.query(
                "DELETE FROM ledger_marks WHERE name = \(source.transactionMark)", logger: logger)
            return .byTime(since)
        }
        return .byTransaction(TransactionScan(next: transaction, pending: stored.pending ?? []))
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
            source, since: since, position: column, condition: "\(column) >= $2", [from], limit: chunk, connection)
        guard rows >= chunk, let last else {
            try await connection.query(
                """
                INSERT INTO ledger_marks (name, value_ms) VALUES (\(source.transactionMark), 0)
                ON CONFLICT (name) DO NOTHING
                """, logger: logger)
            try await connection.query(
                "DELETE FROM ledger_marks WHERE name = \(source.upgradeTimeMark)", logger: logger)
            return (.byTransaction(TransactionScan(next: 0, pending: [])), false)
        }
        var next = last
        if last == from {
            // A whole chunk of one millisecond: all of that millisecond, then past it.
            _ = try await upsertUsers(
                source, since: since, position: column, condition: "\(column) = $2", [from], limit: nil, connection)
            next = from + 1
        }
        try await connection.query(
            """
            INSERT INTO ledger_marks (name, value_ms) VALUES (\(source.upgradeTimeMark), \(next))
            ON CONFLICT (name) DO UPDATE SET value_ms = EXCLUDED.value_ms
            """, logger: logger)
        return (.byTime(next), false)
    }

    /// One chunk of the window's rows by the transaction that wrote them: first the rows of the pending transactions
    /// that have ended by `snapshot` (none after a refresh's first chunk: what is still pending then is running),
    /// then from `scan.next` on in transaction-id order, never past the snapshot's `xmax` — above it a transaction may
    /// have begun after the snapshot, its rows not all visible. Caught up, the scan has got to `xmax`.
    private func scanByTransaction(
        _ source: ReconcileScan.Source, since: Int64, snapshot: TransactionSnapshot, from scan: TransactionScan,
        _ connection: PostgresConnection
    ) async throws -> (next: ScanPosition, caughtUp: Bool) {
        guard scan.next <= snapshot.xmax else {
            // Stored by an instance whose refresh started after this one's: it has read all this one would.
            return (.byTransaction(scan), true)
        }
        let ended = scan.ended(by: snapshot)
        if !ended.isEmpty {
            _ = try await upsertUsers(
                source, since: nil, position: "scan_xid",
                condition: "scan_xid IS NOT NULL AND scan_xid = ANY($2::bigint[]::text[]::xid8[])", [ended],
                limit: nil, connection)
        }
        let chunk = Int64(ReconcileScan.chunkRows)
        let (rows, last) = try await upsertUsers(
            source, since: nil, position: "scan_xid",
            condition: "scan_xid >= $2::text::xid8 AND scan_xid < $3::text::xid8", [scan.next, snapshot.xmax],
            limit: chunk, connection)
        let caughtUp = rows < chunk
        var next = caughtUp ? snapshot.xmax : last ?? scan.next
        if !caughtUp, last == scan.next {
            // A whole chunk written by one transaction (a batch of thousands): all of its rows, then past it.
            _ = try await upsertUsers(
                source, since: nil, position: "scan_xid", condition: "scan_xid = $2::text::xid8", [scan.next],
                limit: nil, connection)
            next = scan.next + 1
        }
        let moved = scan.passing(to: next, snapshot)
        let stored = moved.bounded(snapshot.pendingLimit)
        try await connection.query(
            """
            INSERT INTO ledger_marks (name, value_ms, pending_xids)
            VALUES (\(source.transactionMark), \(stored.next), \(stored.pending))
            ON CONFLICT (name) DO UPDATE SET value_ms = EXCLUDED.value_ms, pending_xids = EXCLUDED.pending_xids
            WHERE (ledger_marks.value_ms, ledger_marks.pending_xids)
                IS DISTINCT FROM (EXCLUDED.value_ms, EXCLUDED.pending_xids)
            """, logger: logger)
        return (.byTransaction(moved), caughtUp)
    }

    /// Records the latest activity of the users of `source`'s rows that `condition` selects (`$2`… are `values`) —
    /// in the window from `since` (`$1`) when given, the first `limit` by `position` when given — in one statement;
    /// answers how many rows it read and the largest `position`. The scan by transaction reads every row it passes
    /// whatever its time: a window taken from a clock ahead must not make it pass rows unread (the users table's
    /// readers keep to the window by the activity they record).
    private func upsertUsers(
        _ source: ReconcileScan.Source, since: Int64?, position: String, condition: String,
        _ values: [any PostgresEncodable & Sendable], limit: Int64?, _ connection: PostgresConnection
    ) async throws -> (rows: Int64, last: Int64?) {
        var bindings = PostgresBindings()
        bindings.append(since ?? Int64.min)
        for value in values { try bindings.append(value) }
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
}

/// The cluster's transactions at one moment (`pg_current_snapshot()`): every id below `xmax` had been given out, and
/// all but the `running` ones had ended.
struct TransactionSnapshot: Sendable {
    var xmax: Int64
    var running: Set<Int64>
    /// The pending transactions a position stores at most: twice the transactions the server can run at once.
    var pendingLimit = TransactionScan.pendingLimit
}

/// How far a scan by transaction has got: every row written by a transaction below `next` has been read, except
/// those of the `pending` transactions (below `next`, running when the scan passed them).
struct TransactionScan: Sendable, Equatable {
    var next: Int64
    var pending: [Int64]

    /// At most this many pending transactions are stored. There are never more than the transactions running at
    /// once (`max_connections` and `max_prepared_transactions`); past it, the position stored is pulled back.
    static let pendingLimit = 1_000

    /// The pending transactions that had ended by `snapshot`: their rows are all visible now.
    func ended(by snapshot: TransactionSnapshot) -> [Int64] {
        pending.filter { $0 < snapshot.xmax && !snapshot.running.contains($0) }
    }

    /// The position once the rows of the transactions that had ended by `snapshot` from here up to `next` are read
    /// (and those of the pending ones that had): the ones still running, passed or pending, are pending.
    func passing(to next: Int64, _ snapshot: TransactionSnapshot) -> TransactionScan {
        let passed = snapshot.running.filter { $0 >= self.next && $0 < next }
        let still = pending.filter { snapshot.running.contains($0) }
        return TransactionScan(next: next, pending: Array(Set(still).union(passed)).sorted())
    }

    /// At most `limit` pending transactions: past it, the position moves back to the first one not kept, so the rows
    /// of the others are read again by the scan from there.
    func bounded(_ limit: Int) -> TransactionScan {
        guard pending.count > limit else { return self }
        let sorted = pending.sorted()
        return TransactionScan(next: sorted[limit], pending: Array(sorted.prefix(limit)))
    }
}

extension ReconcileScan.Source {
    /// PostgreSQL's position, a ``TransactionScan``: `next` in `value_ms`, `pending` in `pending_xids`. A name of its
    /// own, so an older version's time mark beside it (a rolling upgrade) means nothing to it.
    var transactionMark: String { "\(mark)_xid" }
    /// How far the first scan after the upgrade got by time (milliseconds), until the transaction mark exists.
    var upgradeTimeMark: String { "\(mark)_upgrade_ms" }
}

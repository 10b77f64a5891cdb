import Fulfilment

/// How the stores keep `reconcile_users` up to date: the reconciler's due users are read from that table a page at
/// a time (by its `(next_check_ms, user_id)` index), so a page costs the same on a ledger of a thousand grants or of
/// ten million. A claiming reconciliation pass first refreshes it
/// (``ReconciliationLedger/refreshReconciliationUsers(activeSince:)``): it scans what was written since the last scan — grants, and rejections whose reason confirms the user — in chunks,
/// recording each user's latest activity, and keeps its position in `ledger_marks`.
///
/// A grant's time is stamped by the worker before its transaction commits, so one can become visible after a later
/// one was scanned. On PostgreSQL, shared by instances whose clocks and commit delays differ, the scan therefore goes
/// by the transaction that wrote each row, not by its stamp (`PostgresLedgerStore+ReconciliationScan.swift`). On
/// SQLite (one instance, one clock) it goes by time, and the mark is never later than ``overlapMilliseconds`` before
/// now: that covers a commit after its stamp, and a row stamped by a clock running ahead must not carry the mark past
/// the rows still being written. Scanning a user again writes nothing unless the activity is newer.
enum ReconcileScan {
    struct Source: Sendable {
        let mark: String
        let table: String
        let timeColumn: String
        /// Extra condition on the source's rows; `reasons` bound in order when present.
        let reasons: [String]?
    }

    static let sources = [
        Source(mark: "reconcile_scan_grants", table: "grants", timeColumn: "granted_at_ms", reasons: nil),
        Source(
            mark: "reconcile_scan_rejections", table: "rejections", timeColumn: "rejected_at_ms",
            reasons: ConsumeFailureReason.userConfirmingReasons),
    ]

    /// SQLite's: covers a transaction's commit after its stamp (the ledger's 10 s deadline) many times over, and the
    /// instance's clock stepping back a minute. (PostgreSQL scans by transaction and needs none.)
    static let overlapMilliseconds: Int64 = 2 * 60_000
    /// Rows read and written per statement.
    static let chunkRows = 5_000
    /// Scans every source a chunk at a time (`chunk(source, from)`: the first from the source's mark, then from
    /// where the last one got to — a time on SQLite, a transaction on PostgreSQL) until each is caught up or has had
    /// its ``budget``; answers whether all caught up.
    static func catchUp<Position>(
        _ chunk: (Source, Position?) async throws -> (next: Position, caughtUp: Bool)
    ) async throws -> Bool {
        var all = true
        for source in sources {
            let started = ContinuousClock.now
            var from: Position?
            var caughtUp = false
            while !caughtUp, ContinuousClock.now - started < budget {
                // Past its deadline or at shutdown, a refresh stops between chunks (each chunk is whole).
                try Task.checkCancellation()
                let result = try await chunk(source, from)
                caughtUp = result.caughtUp
                from = result.next
            }
            all = all && caughtUp
        }
        return all
    }

    /// Where the next scan starts when this one got to `next`: there, or an overlap before `now` if that is earlier.
    static func mark(after next: Int64, now: Int64) -> Int64 {
        min(next, now - overlapMilliseconds)
    }

    /// Where the next scan starts when this one found nothing from its start on: an overlap before `now` — never the
    /// start itself, which can be later (past a millisecond fuller than a chunk, or a stamp from a clock ahead).
    static func markWhenNothingFound(now: Int64) -> Int64 {
        now - overlapMilliseconds
    }

    /// Where a scan starts: where the last chunk of this refresh got to, else the stored mark — unless that is later
    /// than an overlap before `now` (the clock stepped back since it was written), then from `since` again — never
    /// before `since`.
    static func start(since: Int64, given: Int64?, stored: Int64?, now: Int64) -> Int64 {
        let stored = stored.flatMap { $0 <= now - overlapMilliseconds ? $0 : nil }
        return max(since, given ?? stored ?? since)
    }

    /// How long one refresh spends catching up on each source at most (a ledger upgraded with millions of recent grants
    /// catches up over several refreshes; each is one call under the ledger's deadline).
    static let budget: Duration = .seconds(2)
}

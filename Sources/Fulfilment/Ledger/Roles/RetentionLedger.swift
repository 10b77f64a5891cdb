import Foundation

/// The rows retention removes from the ledger, each kind by its own time column (oldest first). Grants are never
/// among them: a grant is the idempotency record of its paymentSeq, and a duplicate of a pruned grant would be granted
/// again.
public enum PrunableRows: String, Sendable, Hashable, CaseIterable {
    /// Outbox rows of events already published (by `published_at`); an unpublished row is never removed.
    case publishedOutbox = "published_outbox"
    /// Rejections whose reason means Gamebase confirmed the payment is the claimant's
    /// (``ConsumeFailureReason/confirmsUser``), by `rejected_at`.
    case confirmedRejections = "confirmed_rejections"
    /// Rejections anyone who can write to the purchases topic can cause (forged or mistaken claims), by
    /// `rejected_at`; their published consume-failed outbox rows go with them.
    case unconfirmedRejections = "unconfirmed_rejections"
    /// Recorded dead letters, by `failed_at` (the dead-letter topic keeps its own records).
    case deadLetters = "dead_letters"
    /// Recorded dead letters of malformed records (anyone can cause them), by `failed_at`.
    case malformedDeadLetters = "malformed_dead_letters"
    /// Reconciler users not active since the cutoff (by their last grant or confirmed rejection; one claimed by
    /// `reconcile --user` and never active, by its next check).
    case reconcileUsers = "reconcile_users"
    /// Reconciler sightings first seen before the cutoff.
    case reconcileSightings = "reconcile_sightings"
    /// Store notifications that changed nothing and are no refund (kind `other`: Google's notification of each
    /// one-time purchase, subscription and test notifications), by `received_at`. Refunds, reversals, declined refunds
    /// and consumption requests are money records, kept as long as grants.
    case otherNotifications = "other_notifications"
    /// Records of the store-notifications topic (or Apple's history) that were not believed (anyone who can write to
    /// the topic can cause them), by when their body was last seen.
    case refusedNotifications = "refused_notifications"

    /// The table the rows are in (the label of `iap_ledger_pruned_rows_total`).
    public var table: String {
        switch self {
        case .publishedOutbox: "outbox"
        case .confirmedRejections, .unconfirmedRejections: "rejections"
        case .deadLetters, .malformedDeadLetters: "dead_letters"
        case .reconcileUsers: "reconcile_users"
        case .reconcileSightings: "reconcile_sightings"
        case .otherNotifications: "store_notifications"
        case .refusedNotifications: "refused_notifications"
        }
    }

    /// The rejection reasons no Gamebase answer confirmed as the claimant's, as stored in the ledger.
    public static let unconfirmedReasons: [String] = ConsumeFailureReason.allCases.filter { !$0.confirmsUser }.map(
        \.rawValue)
}

/// The ledger's role in retention: what the pruner needs from a store: batched deletes by age, the cutoff of a count bound, row counts and
/// giving freed space back. Every method throws ``LedgerError``.
///
/// Each call is one short transaction: nothing holds a lock on a table for longer than a batch takes.
public protocol RetentionLedger: Sendable {
    /// Deletes up to `limit` of the oldest `rows` older than `before`; answers how many, or `nil` when another instance
    /// is pruning the shared ledger at this moment (PostgreSQL: a transaction-scoped advisory lock), in which case
    /// nothing was deleted.
    func prune(_ rows: PrunableRows, before: Date, limit: Int) async throws -> Int?

    /// The time of the newest of `rows` beyond the `keeping` newest ones (the cutoff of a count bound: delete what is
    /// not newer than it); `nil` when there are no more than `keeping`.
    func countBoundCutoff(_ rows: PrunableRows, keeping: Int) async throws -> Date?

    /// Rows by table: exact on SQLite, the statistics' estimate on PostgreSQL (counting millions of rows would cost
    /// more than the number is worth).
    func rowCounts() async throws -> [String: Int]

    /// Gives the space freed by deletes back to the file system where the store keeps it (SQLite's incremental
    /// vacuum, at most `pages` pages); answers the pages given back. PostgreSQL's autovacuum reuses the space.
    func reclaimSpace(pages: Int) async throws -> Int
}

/// The tables `iap_ledger_rows{table}` reports.
public enum LedgerTables {
    public static let all = [
        "grants", "outbox", "rejections", "dead_letters", "consume_attempts", "reconcile_users", "reconcile_sightings",
        "store_notifications", "refused_notifications",
    ]
}

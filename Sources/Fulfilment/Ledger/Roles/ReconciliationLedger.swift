import Foundation

/// The ledger's role in reconciliation: what the reconciler keeps in it: when each user is next due for a check (so instances sharing a
/// PostgreSQL ledger check each user once per interval), and when each payment was first seen unconsumed and
/// ungranted (so the grace period survives restarts and is the same for every instance).
///
/// Every method throws ``LedgerError``.
public protocol ReconciliationLedger: Sendable {
    /// The users to reconcile: those with a grant since `activeSince`, or with a rejection since then whose reason
    /// means Gamebase confirmed the payment is theirs (``ConsumeFailureReason/confirmsUser``). With `dueAt`, only
    /// the users not claimed for a check after it, those waiting longest first, read from the users table as the last
    /// ``refreshReconciliationUsers(activeSince:)`` left it; with `nil`, all, read from the grants and rejections.
    func reconciliationUsers(activeSince: Date, dueAt: Date?, limit: Int) async throws -> [String]

    /// Brings the users table up to date with the grants and confirmed rejections written since the last refresh
    /// (each user's latest activity), spending a bounded time; `true` when it caught up. A claiming pass calls it once
    /// before reading due users.
    @discardableResult
    func refreshReconciliationUsers(activeSince: Date) async throws -> Bool

    /// Claims users for a check: each of `userIds` that is due at `now` (never claimed, or its claim ran out) is
    /// given `nextCheck` and returned. Two instances claiming the same user at once: one gets it, the other not.
    func claimReconciliationUsers(_ userIds: [String], now: Date, nextCheck: Date) async throws -> [String]

    /// When each payment was first seen unconsumed and ungranted, by paymentSeq. With `record`, payments not seen
    /// before are recorded as first seen at `now` (and returned with it); without, they are left out.
    func reconciliationSightings(_ payments: [ReconciliationSighting], now: Date, record: Bool) async throws
        -> [String: Date]

    /// Forgets the sightings of payments that are decided (granted or rejected).
    func forgetReconciliationSightings(paymentSeqs: [String]) async throws

    /// Deletes user claims that ran out before `before` and sightings older than it.
    func pruneReconciliation(before: Date) async throws
}

/// A payment the reconciler saw unconsumed at Gamebase and not in the ledger.
public struct ReconciliationSighting: Sendable, Hashable {
    public var paymentSeq: String
    public var userId: String

    public init(paymentSeq: String, userId: String) {
        self.paymentSeq = paymentSeq
        self.userId = userId
    }
}

extension ConsumeFailureReason {
    /// Whether a rejection for this reason means Gamebase confirmed that the payment belongs to the message's
    /// userId (Get Payment Transaction answered with that userId). Only such users are reconciled: a userId that
    /// anyone can write to the purchases topic must not make the worker call Gamebase for it.
    public var confirmsUser: Bool {
        switch self {
        case .notConsumable, .consumedWithoutGrant, .testPurchase, .refunded: true
        default: false
        }
    }

    /// The reasons that confirm the user, as stored in the ledger.
    public static let userConfirmingReasons: [String] = allCases.filter(\.confirmsUser).map(\.rawValue)
}

import Foundation

/// The ledger's role in the sweep: what the flow left unfinished (grants still waiting for Consume, events a crash left
/// unpublished), claimed with a lease so several instances share the work, and the counts the sweeper reports.
///
/// Every method throws ``LedgerError``.
public protocol SweepLedger: Sendable {
    /// Claims up to `limit` grants still waiting for Consume (`granted`, not set aside:
    /// ``PurchaseLedger/setAsideRevokedGrant(paymentSeq:at:)``) since before `grantedBefore`, leasing them until `now + lease` so
    /// other workers' sweepers skip them. A lease that ends before `now`, or beyond ``LeaseEnd/latest(now:until:)``
    /// (taken by a clock that has since stepped back), has ended.
    func claimUnconsumedGrants(grantedBefore: Date, limit: Int, lease: Duration, now: Date) async throws
        -> [GrantRecord]

    /// Claims up to `limit` events unpublished since before `createdBefore`, leased the same way.
    func claimUnpublishedEvents(createdBefore: Date, limit: Int, lease: Duration, now: Date) async throws
        -> [OutboxEvent]

    /// Grants still waiting for Consume, not counting those set aside (cheap: a partial index); also the readiness
    /// probe of the ledger, so it fails when the ledger cannot take writes (PostgreSQL read-only) even though it
    /// answers.
    func countUnconsumed() async throws -> Int

    /// When the oldest grant still waiting for Consume (not set aside) was granted; `nil` when none waits.
    func oldestUnconsumedGrantedAt() async throws -> Date?

    /// Grants set aside: revoked by a refund, and Gamebase refused their Consume for good (a partial index).
    func countSetAside() async throws -> Int

    /// Grants set aside whose refund no longer stands wait for Consume again; answers how many. A reversal takes its
    /// grant back as it is recorded (``RefundPlan/resumesConsume``); this is the backstop for one that could not: a
    /// reversal recorded by an instance of a version before set-asides, or committed while another instance was setting
    /// the grant aside.
    func resumeSetAsideGrants() async throws -> Int
}

/// When a lease read from the ledger has ended, for every claim that leases rows (the sweeper's, a store history
/// position's).
public enum LeaseEnd {
    /// The latest end, in milliseconds, a lease still running at `now` can have, for a claim that leases until
    /// `until`: one lease length beyond `until`. A lease ending later was taken by a clock that has since stepped back
    /// by more than a lease, and has ended. The slack of a whole lease keeps a claimant whose `now` is a little stale,
    /// or whose clock is a little behind another instance's, from taking a lease that still runs.
    public static func latest(now: Int64, until: Int64) -> Int64 {
        let (length, overflow) = until.subtractingReportingOverflow(now)
        guard !overflow, length > 0 else { return until }
        return until.addingReportingOverflow(length).overflow ? .max : until + length
    }
}

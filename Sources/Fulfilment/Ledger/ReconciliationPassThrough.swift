import Foundation

/// A ledger wrapper whose reconciliation calls go unchanged to the ledger it wraps (the reconciler's calls are few
/// and already batched by user).
public protocol ReconciliationPassThrough: ReconciliationLedger {
    var base: any LedgerStore { get }
}

extension ReconciliationPassThrough {
    public func reconciliationUsers(activeSince: Date, dueAt: Date?, limit: Int) async throws -> [String] {
        try await base.reconciliationUsers(activeSince: activeSince, dueAt: dueAt, limit: limit)
    }

    public func claimReconciliationUsers(_ userIds: [String], now: Date, nextCheck: Date) async throws -> [String] {
        try await base.claimReconciliationUsers(userIds, now: now, nextCheck: nextCheck)
    }

    public func reconciliationSightings(_ payments: [ReconciliationSighting], now: Date, record: Bool) async throws
        -> [String: Date]
    {
        try await base.reconciliationSightings(payments, now: now, record: record)
    }

    public func forgetReconciliationSightings(paymentSeqs: [String]) async throws {
        try await base.forgetReconciliationSightings(paymentSeqs: paymentSeqs)
    }

    public func pruneReconciliation(before: Date) async throws {
        try await base.pruneReconciliation(before: before)
    }
}

extension LedgerBatcher: ReconciliationPassThrough {}

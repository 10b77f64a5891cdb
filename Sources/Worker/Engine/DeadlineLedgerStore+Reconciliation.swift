import Foundation
import Fulfilment

/// The reconciler's ledger calls, each with the same deadline as the flow's.
extension DeadlineLedgerStore {
    public func reconciliationUsers(activeSince: Date, dueAt: Date?, limit: Int) async throws -> [String] {
        try await bounded("reconciliation users") { [base] in
            try await base.reconciliationUsers(activeSince: activeSince, dueAt: dueAt, limit: limit)
        }
    }

    public func refreshReconciliationUsers(activeSince: Date) async throws -> Bool {
        try await bounded("reconciliation users refresh") { [base] in
            try await base.refreshReconciliationUsers(activeSince: activeSince)
        }
    }

    public func claimReconciliationUsers(_ userIds: [String], now: Date, nextCheck: Date) async throws -> [String] {
        try await bounded("reconciliation claim") { [base] in
            try await base.claimReconciliationUsers(userIds, now: now, nextCheck: nextCheck)
        }
    }

    public func reconciliationSightings(_ payments: [ReconciliationSighting], now: Date, record: Bool) async throws
        -> [String: Date]
    {
        try await bounded("reconciliation sightings") { [base] in
            try await base.reconciliationSightings(payments, now: now, record: record)
        }
    }

    public func forgetReconciliationSightings(paymentSeqs: [String]) async throws {
        try await bounded("reconciliation forget") { [base] in
            try await base.forgetReconciliationSightings(paymentSeqs: paymentSeqs)
        }
    }

    public func pruneReconciliation(before: Date) async throws {
        try await bounded("reconciliation prune") { [base] in try await base.pruneReconciliation(before: before) }
    }
}

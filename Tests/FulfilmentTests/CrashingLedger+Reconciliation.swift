import Foundation
import Fulfilment

extension CrashingLedger {
    func reconciliationUsers(activeSince: Date, dueAt: Date?, limit: Int) async throws -> [String] {
        try await base.reconciliationUsers(activeSince: activeSince, dueAt: dueAt, limit: limit)
    }
    func claimReconciliationUsers(_ userIds: [String], now: Date, nextCheck: Date) async throws -> [String] {
        try await base.claimReconciliationUsers(userIds, now: now, nextCheck: nextCheck)
    }
    func reconciliationSightings(_ payments: [ReconciliationSighting], now: Date, record: Bool) async throws -> [String:
        Date]
    {
        try await base.reconciliationSightings(payments, now: now, record: record)
    }
    func forgetReconciliationSightings(paymentSeqs: [String]) async throws {
        try await base.forgetReconciliationSightings(paymentSeqs: paymentSeqs)
    }
    func pruneReconciliation(before: Date) async throws { try await base.pruneReconciliation(before: before) }
}

import Foundation
import Fulfilment
import Synchronization

/// The reconciler's calls with the SQL stores' semantics (the flow never makes them; they complete the port).
extension MemoryLedger {
    public func reconciliationUsers(activeSince: Date, dueAt: Date?, limit: Int) async throws -> [String] {
        let since = activeSince.ms
        let due = dueAt?.ms ?? Int64.max
        return state.withLock { state in
            var users = Set(state.grants.values.filter { $0.grantedAt.ms >= since }.map(\.userId))
            for rejection in state.rejections.values
            where rejection.rejectedAt.ms >= since
                && ConsumeFailureReason.userConfirmingReasons.contains(rejection.reason)
            {
                users.insert(rejection.key.userId)
            }
            return users.filter { (state.reconcileUsers[$0] ?? 0) <= due }
                .sorted { (state.reconcileUsers[$0] ?? 0, $0) < (state.reconcileUsers[$1] ?? 0, $1) }
                .prefix(max(0, limit)).map { $0 }
        }
    }

    /// Nothing to bring up to date: `reconciliationUsers` reads the grants and rejections themselves.
    public func refreshReconciliationUsers(activeSince: Date) async throws -> Bool { true }

    public func claimReconciliationUsers(_ userIds: [String], now: Date, nextCheck: Date) async throws -> [String] {
        state.withLock { state in
            Set(userIds).sorted().filter { user in
                guard (state.reconcileUsers[user] ?? 0) <= now.ms else { return false }
                state.reconcileUsers[user] = nextCheck.ms
                return true
            }
        }
    }

    public func reconciliationSightings(_ payments: [ReconciliationSighting], now: Date, record: Bool) async throws
        -> [String: Date]
    {
        state.withLock { state in
            var seen: [String: Date] = [:]
            for payment in payments {
                if record, state.sightings[payment.paymentSeq] == nil {
                    state.sightings[payment.paymentSeq] = (payment.userId, now.ms)
                }
                if let sighting = state.sightings[payment.paymentSeq] {
                    seen[payment.paymentSeq] = Date(timeIntervalSince1970: Double(sighting.firstSeen) / 1000)
                }
            }
            return seen
        }
    }

    public func forgetReconciliationSightings(paymentSeqs: [String]) async throws {
        state.withLock { state in for seq in paymentSeqs { state.sightings[seq] = nil } }
    }

    public func pruneReconciliation(before: Date) async throws {
        let ms = before.ms
        state.withLock { state in
            state.reconcileUsers = state.reconcileUsers.filter { $0.value >= ms }
            state.sightings = state.sightings.filter { $0.value.firstSeen >= ms }
        }
    }
}

extension Date {
    /// Milliseconds since the epoch, saturating (the stores' column unit).
    fileprivate var ms: Int64 { Int64(exactly: (timeIntervalSince1970 * 1000).rounded(.down)) ?? (timeIntervalSince1970 > 0 ? .max : .min) }
}

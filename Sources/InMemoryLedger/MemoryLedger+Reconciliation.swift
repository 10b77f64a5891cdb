import Foundation
import Fulfilment
import Synchronization

/// The reconciler's tables: when each user is next due (claimed by one caller at a time, under the lock) and when
/// each payment was first seen.
extension MemoryLedger {
    public func reconciliationUsers(activeSince: Date, dueAt: Date?, limit: Int) async throws -> [String] {
        let since = activeSince.epochMilliseconds
        guard let dueAt else { return allActiveUsers(since: since, limit: limit) }
        let due = dueAt.epochMilliseconds
        return state.withLock { state in
            let users = state.reconcileUsers.filter { _, user in
                user.nextCheck <= due && (user.lastActive.map { $0 >= since } ?? false)
            }
            .sorted { ($0.value.nextCheck, $0.key) < ($1.value.nextCheck, $1.key) }
            return limited(users, limit).map(\.key.text)
        }
    }

    /// Every user active since `since` (`reconcile` without claims): read from the grants and rejections themselves,
    /// those never claimed first.
    func allActiveUsers(since: Int64, limit: Int) -> [String] {
        state.withLock { state in
            let users = state.activity(since: since).reduce(into: Set<BinaryText>()) { $0.formUnion($1.keys) }
            let page = users.map { ($0, state.reconcileUsers[$0]?.nextCheck ?? 0) }.sorted {
                ($0.1, $0.0) < ($1.1, $1.0)
            }
            return limited(page, limit).map(\.0.text)
        }
    }

    /// Records each user's latest activity since `activeSince`, a user new to the table due from its first. The
    /// stores scan incrementally because writers elsewhere commit late (SQLite by time from a mark an overlap behind
    /// its clock, PostgreSQL by the transaction that wrote each row, which may also record users whose activity is
    /// older than the window: readers keep to the window by `last_active_ms`); here every write is whole when the lock
    /// is free, so one scan of everything since `activeSince` is what their scans converge to, and it always catches up.
    public func refreshReconciliationUsers(activeSince: Date) async throws -> Bool {
        let since = activeSince.epochMilliseconds
        state.withLock { state in
            // The sources in the stores' order: grants, then confirmed rejections.
            for source in state.activity(since: since) {
                for (user, active) in source.sorted(by: { $0.key < $1.key }) {
                    if let row = state.reconcileUsers[user] {
                        if (row.lastActive ?? 0) < active.latest {
                            state.reconcileUsers[user]?.lastActive = active.latest
                        }
                    } else {
                        state.reconcileUsers[user] = UserRow(nextCheck: active.first, lastActive: active.latest)
                    }
                }
            }
        }
        return true
    }

    public func claimReconciliationUsers(_ userIds: [String], now: Date, nextCheck: Date) async throws -> [String] {
        let users = Set(userIds.map(BinaryText.init)).sorted()
        let nowMs = now.epochMilliseconds
        let next = nextCheck.epochMilliseconds
        return state.withLock { state in
            users.filter { user in
                // A user never checked is due at once.
                let due = state.reconcileUsers[user, default: UserRow(nextCheck: 0, lastActive: nil)]
                state.reconcileUsers[user] = due
                guard due.nextCheck <= nowMs else { return false }
                state.reconcileUsers[user]?.nextCheck = next
                return true
            }
            .map(\.text)
        }
    }

    public func reconciliationSightings(_ payments: [ReconciliationSighting], now: Date, record: Bool) async throws
        -> [String: Date]
    {
        let nowMs = now.epochMilliseconds
        return state.withLock { state in
            if record {
                for payment in payments where state.sightings[BinaryText(payment.paymentSeq)] == nil {
                    state.sightings[BinaryText(payment.paymentSeq)] = SightingRow(
                        userId: payment.userId, firstSeen: nowMs)
                }
            }
            var seen: [String: Date] = [:]
            for payment in payments {
                if let sighting = state.sightings[BinaryText(payment.paymentSeq)] {
                    seen[payment.paymentSeq] = Date(epochMilliseconds: sighting.firstSeen)
                }
            }
            return seen
        }
    }

    public func forgetReconciliationSightings(paymentSeqs: [String]) async throws {
        state.withLock { state in
            for paymentSeq in paymentSeqs { state.sightings[BinaryText(paymentSeq)] = nil }
        }
    }

    public func pruneReconciliation(before: Date) async throws {
        let cutoff = before.epochMilliseconds
        state.withLock { state in
            state.reconcileUsers = state.reconcileUsers.filter { ($0.value.lastActive ?? $0.value.nextCheck) >= cutoff }
            state.sightings = state.sightings.filter { $0.value.firstSeen >= cutoff }
        }
    }
}

extension MemoryLedger.State {
    /// A user's activity in one source: their first and latest time in it.
    struct Activity {
        var first: Int64
        var latest: Int64
    }

    /// The users of the grants since `since`, then of the rejections since `since` whose reason means Gamebase
    /// confirmed the payment is theirs (``ConsumeFailureReason/confirmsUser``).
    func activity(since: Int64) -> [[BinaryText: Activity]] {
        let confirming = Set(ConsumeFailureReason.userConfirmingReasons.map(BinaryText.init))
        var granted: [BinaryText: Activity] = [:]
        for row in grants.values {
            record(&granted, BinaryText(row.record.userId), row.record.grantedAt.epochMilliseconds, since: since)
        }
        var rejected: [BinaryText: Activity] = [:]
        for row in rejections.values where confirming.contains(BinaryText(row.record.reason)) {
            record(&rejected, BinaryText(row.record.key.userId), row.record.rejectedAt.epochMilliseconds, since: since)
        }
        return [granted, rejected]
    }

    private func record(_ users: inout [BinaryText: Activity], _ user: BinaryText, _ at: Int64, since: Int64) {
        guard at >= since else { return }
        if let known = users[user] {
            users[user] = Activity(first: min(known.first, at), latest: max(known.latest, at))
        } else {
            users[user] = Activity(first: at, latest: at)
        }
    }
}

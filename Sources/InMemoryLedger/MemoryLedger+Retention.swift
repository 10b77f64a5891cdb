import Foundation
import Fulfilment
import Synchronization

/// Retention: each kind of row by its own time column, oldest first, as the stores select them. One ledger, one
/// pruner: a batch is never left to another instance (`nil`), and there is no file to give space back to.
extension MemoryLedger {
    public func prune(_ rows: PrunableRows, before: Date, limit: Int) async throws -> Int? {
        let cutoff = before.epochMilliseconds
        let limit = max(1, limit)
        return state.withLock { state in
            switch rows {
            case .publishedOutbox:
                let old = state.outbox.compactMap { key, row in
                    row.event.publishedAt.flatMap { $0.epochMilliseconds < cutoff ? (key, $0, row.row) : nil }
                }
                .sorted { ($0.1, $0.2) < ($1.1, $1.2) }
                let gone = limited(old, limit)
                for (key, _, _) in gone { state.outbox[key] = nil }
                return gone.count
            case .confirmedRejections, .unconfirmedRejections:
                let reasons = Set(
                    (rows == .confirmedRejections
                        ? ConsumeFailureReason.userConfirmingReasons : PrunableRows.unconfirmedReasons)
                        .map(BinaryText.init))
                let old = state.rejections.filter {
                    $0.value.record.rejectedAt.epochMilliseconds < cutoff
                        && reasons.contains(BinaryText($0.value.record.reason))
                }
                .sorted { ($0.value.record.rejectedAt, $0.value.row) < ($1.value.record.rejectedAt, $1.value.row) }
                let gone = limited(old, limit)
                for (key, row) in gone {
                    state.rejections[key] = nil
                    // The consume-failed event of a claim nobody confirmed goes with it, once published.
                    let event = BinaryText(row.record.eventID)
                    if rows == .unconfirmedRejections, state.outbox[event]?.event.publishedAt != nil {
                        state.outbox[event] = nil
                    }
                }
                return gone.count
            case .deadLetters, .malformedDeadLetters:
                let malformed = BinaryText(ConsumeFailureReason.malformedMessage.rawValue)
                let old = state.deadLetters.filter {
                    $0.entry.failedAt.epochMilliseconds < cutoff
                        && (rows == .deadLetters || malformed.matches($0.entry.reason))
                }
                .sorted { ($0.entry.failedAt, $0.id) < ($1.entry.failedAt, $1.id) }
                let gone = Set(limited(old, limit).map(\.id))
                state.deadLetters.removeAll { gone.contains($0.id) }
                return gone.count
            case .reconcileUsers:
                let old = state.reconcileUsers.filter { ($0.value.lastActive ?? $0.value.nextCheck) < cutoff }
                    .sorted { ($0.value.nextCheck, $0.key) < ($1.value.nextCheck, $1.key) }
                let gone = limited(old, limit)
                for (key, _) in gone { state.reconcileUsers[key] = nil }
                return gone.count
            case .reconcileSightings:
                let old = state.sightings.filter { $0.value.firstSeen < cutoff }
                    .sorted { ($0.value.firstSeen, $0.key) < ($1.value.firstSeen, $1.key) }
                let gone = limited(old, limit)
                for (key, _) in gone { state.sightings[key] = nil }
                return gone.count
            case .otherNotifications:
                let old = state.notifications.filter {
                    $0.value.record.notification.kind == .other && $0.value.record.outcome == .recorded
                        && $0.value.record.receivedAt.epochMilliseconds < cutoff
                }
                .sorted { ($0.value.record.receivedAt, $0.value.row) < ($1.value.record.receivedAt, $1.value.row) }
                let gone = limited(old, limit)
                for (key, _) in gone { state.notifications[key] = nil }
                return gone.count
            case .refusedNotifications:
                let old = state.refusals.filter { $0.value.record.lastReceivedAt.epochMilliseconds < cutoff }
                    .sorted {
                        ($0.value.record.lastReceivedAt, $0.value.row) < ($1.value.record.lastReceivedAt, $1.value.row)
                    }
                let gone = limited(old, limit)
                for (key, _) in gone { state.refusals[key] = nil }
                return gone.count
            }
        }
    }

    public func countBoundCutoff(_ rows: PrunableRows, keeping: Int) async throws -> Date? {
        let keeping = max(0, keeping)
        return state.withLock { state in
            let times: [Date]
            switch rows {
            case .confirmedRejections, .unconfirmedRejections:
                let reasons = Set(
                    (rows == .confirmedRejections
                        ? ConsumeFailureReason.userConfirmingReasons : PrunableRows.unconfirmedReasons)
                        .map(BinaryText.init))
                times = state.rejections.values.filter { reasons.contains(BinaryText($0.record.reason)) }
                    .map(\.record.rejectedAt)
            case .deadLetters:
                times = state.deadLetters.map(\.entry.failedAt)
            case .malformedDeadLetters:
                let malformed = BinaryText(ConsumeFailureReason.malformedMessage.rawValue)
                times = state.deadLetters.filter { malformed.matches($0.entry.reason) }.map(\.entry.failedAt)
            case .publishedOutbox:
                times = state.outbox.values.compactMap(\.event.publishedAt)
            case .refusedNotifications:
                times = state.refusals.values.map(\.record.lastReceivedAt)
            case .otherNotifications:
                times = state.notifications.values.map(\.record)
                    .filter { $0.notification.kind == .other && $0.outcome == .recorded }.map(\.receivedAt)
            case .reconcileUsers, .reconcileSightings:
                return nil
            }
            // The newest beyond the `keeping` newest (`ORDER BY … DESC LIMIT 1 OFFSET keeping`).
            let newestFirst = times.sorted(by: >)
            return keeping < newestFirst.count ? newestFirst[keeping] : nil
        }
    }

    public func rowCounts() async throws -> [String: Int] {
        state.withLock { state in
            let counts = [
                "grants": state.grants.count, "outbox": state.outbox.count, "rejections": state.rejections.count,
                "dead_letters": state.deadLetters.count,
                "consume_attempts": state.consumeAttempts.values.reduce(0) { $0 + $1.count },
                "reconcile_users": state.reconcileUsers.count, "reconcile_sightings": state.sightings.count,
                "store_notifications": state.notifications.count, "refused_notifications": state.refusals.count,
            ]
            return Dictionary(uniqueKeysWithValues: LedgerTables.all.map { ($0, counts[$0] ?? 0) })
        }
    }

    public func reclaimSpace(pages: Int) async throws -> Int { 0 }
}

import Foundation
import Fulfilment
import Wire

/// A purchase's refund lines: each store notification about its payment, its revocation (and reversal), and each
/// answer to Apple's consumption requests, in the purchase's timeline (origin `store`).
extension PurchaseTimeline {
    /// What the ledger holds of a payment's refunds.
    public struct Refunds: Sendable, Hashable {
        public var notifications: [StoreNotificationRecord]
        /// The grant's revocations, by number.
        public var revocations: [RevocationRecord]
        public var answers: [ConsumptionAnswer]

        public init(
            notifications: [StoreNotificationRecord] = [], revocations: [RevocationRecord] = [],
            answers: [ConsumptionAnswer] = []
        ) {
            self.notifications = notifications
            self.revocations = revocations
            self.answers = answers
        }

        public var isEmpty: Bool { notifications.isEmpty && revocations.isEmpty && answers.isEmpty }
    }

    /// This timeline with `refunds`' lines merged in time order, and its status saying a revocation.
    public func adding(_ refunds: Refunds) -> PurchaseTimeline {
        guard !refunds.isEmpty else { return self }
        var timeline = self
        var lines = entries
        for record in refunds.notifications { lines.append(Self.notificationLine(record)) }
        for revocation in refunds.revocations {
            var fields = [
                "notification_id": revocation.notificationId, "store": revocation.store.rawValue,
                "reason": revocation.reason, "revoked_at": RFC3339.string(revocation.revokedAt),
                "event_id": EventFactory.itemRevokedID(paymentSeq: revocation.paymentSeq, number: revocation.number),
            ]
            if let quantity = revocation.quantity { fields["quantity"] = String(quantity) }
            let what = revocation.isPartial ? "partly revoked" : "revoked"
            lines.append(
                TimelineEntry(
                    time: revocation.recordedAt, origin: .ledger, kind: .revocation,
                    summary:
                        "\(what): the \(revocation.store.rawValue) refund of \(RFC3339.string(revocation.revokedAt)) "
                        + "(\(revocation.reason)\(revocation.quantity.map { ", \($0) units" } ?? "")); item-revoked event "
                        + "written", fields: fields))
            if let reversedBy = revocation.reversedBy, let at = revocation.reversedAt {
                lines.append(
                    TimelineEntry(
                        time: at, origin: .store, kind: .revocation,
                        summary: "refund reversed by the store; refund-reversed event written",
                        fields: [
                            "notification_id": reversedBy,
                            "event_id": EventFactory.refundReversedID(
                                paymentSeq: revocation.paymentSeq, number: revocation.number),
                        ]))
            }
        }
        let whole = refunds.revocations.filter { !$0.isPartial }
        let partial = refunds.revocations.filter(\.isPartial)
        if let latest = whole.last {
            timeline.status += latest.reversedBy == nil ? "; revoked (refunded)" : "; revoked, then reversed"
        }
        if !partial.isEmpty {
            // Saturating: a store's quantity is read as it came, up to Int.max, and a sum must not trap.
            let units = partial.compactMap(\.quantity).reduce(0) { sum, units in
                let (total, overflow) = sum.addingReportingOverflow(max(0, units))
                return overflow ? Int.max : total
            }
            timeline.status += "; \(partial.count) partial refund\(partial.count == 1 ? "" : "s")"
            if units > 0 { timeline.status += " (\(units) units)" }
        }
        if whole.isEmpty, refunds.notifications.contains(where: { $0.outcome == .pending }) {
            timeline.status += "; refunded before any grant (pending refund)"
        }
        if refunds.notifications.contains(where: { $0.outcome == .pendingPartial }) {
            timeline.status += "; partly refunded before its grant (pending partial refund, settled after the grant)"
        }
        for answer in refunds.answers { lines.append(Self.answerLine(answer)) }
        timeline.entries = Self.ordered(lines)
        return timeline
    }

    /// A timeline of refunds alone: a payment the ledger knows nothing else of.
    public init(paymentId: String, refunds: Refunds) {
        self.init(
            paymentSeq: nil, userId: nil, paymentId: paymentId, status: "no purchase in the ledger", entries: [])
        self = adding(refunds)
        if refunds.notifications.contains(where: { $0.outcome == .pending }) {
            status = "refunded by the store; no purchase in the ledger (pending refund)"
        }
    }

    static func notificationLine(_ record: StoreNotificationRecord) -> TimelineEntry {
        let n = record.notification
        var fields = [
            "notification_id": n.notificationId, "store": n.store.rawValue, "store_type": n.storeType,
            "kind": n.kind.rawValue, "outcome": record.outcome.rawValue, "channel": record.channel.rawValue,
            "received_at": RFC3339.string(record.receivedAt),
        ]
        if let reason = n.reason { fields["store_reason"] = reason }
        if let hash = n.purchaseTokenHash { fields["token_hash"] = Self.shortHash(hash) }
        let what: String
        switch n.kind {
        case .refund: what = "refund"
        case .refundReversed: what = "refund reversed"
        case .refundDeclined: what = "refund declined"
        case .consumptionRequest: what = "consumption request (a refund asked of Apple)"
        case .other: what = "notification \(n.storeType)"
        }
        return TimelineEntry(
            time: n.occurredAt, origin: .store, kind: .refund,
            summary: "\(n.store.rawValue) \(what), \(record.outcome.rawValue)", fields: fields)
    }

    static func answerLine(_ answer: ConsumptionAnswer) -> TimelineEntry {
        var fields = [
            "notification_id": answer.notificationId, "state": answer.state.rawValue,
            "attempts": String(answer.attempts),
        ]
        if let status = answer.deliveryStatus { fields["delivery_status"] = status }
        if let error = answer.lastError { fields["last_error"] = error }
        let summary: String
        switch answer.state {
        case .answered: summary = "consumption request answered: \(answer.deliveryStatus ?? "-")"
        case .pending: summary = "consumption request not answered yet (\(answer.attempts) attempts)"
        case .gaveUp: summary = "consumption request given up: \(answer.lastError ?? "-")"
        }
        return TimelineEntry(
            time: answer.answeredAt ?? answer.nextAttemptAt ?? Date(timeIntervalSince1970: 0), origin: .store,
            kind: .consumptionAnswer, summary: summary, fields: fields)
    }
}

extension PurchaseTimeline {
    /// A refused store record found by the notification id it claims: no purchase, why it was refused, when, how
    /// often and where it last came from (docs/runbook.md, "Reading a refused notification again").
    public init(refused r: RefusedNotification) {
        let store = r.store?.rawValue ?? "unknown"
        var fields = [
            "store": store, "code": r.code, "body_sha256": r.bodyHash, "body_bytes": String(r.bodyBytes),
            "count": String(r.count),
        ]
        if let claimed = r.claimedId { fields["claimed_notification_id"] = claimed }
        // The source kept is where it last came from: said on the first line only when there is no later one.
        if let source = r.source, r.count <= 1 { fields["source"] = source }
        var entries = [
            TimelineEntry(
                time: r.firstReceivedAt, origin: .store, kind: .refusal,
                summary: "\(store) notification refused (\(r.code)), never believed: \(r.detail)", fields: fields)
        ]
        if r.count > 1 {
            entries.append(
                TimelineEntry(
                    time: r.lastReceivedAt, origin: .store, kind: .refusal,
                    summary: "refused again, \(r.count) times in all; last from \(r.source ?? "-")",
                    fields: ["count": String(r.count), "source": r.source ?? ""]))
        }
        self.init(
            paymentSeq: nil, userId: nil, paymentId: nil,
            status: "refused \(store) notification (\(r.code)), its id only claimed: nothing revoked or recorded",
            entries: entries)
    }
}

import Foundation
import Fulfilment
import Kafka
import Ledger
import Wire

/// What the demo saw, and its readable summary.
public struct DemoReport: Sendable {
    public let batch: DemoBatch
    /// `iap_purchases_total` by outcome.
    public let outcomes: [String: Int]
    /// Gamebase calls by `api/result`, as the worker counted them.
    public let gamebaseCalls: [String: Int]
    /// Successful Consumes by paymentSeq, as the simulator counted them.
    public let simulatorConsumes: [String: Int]
    public let ledger: LedgerStats
    /// Records read back from the item-granted, consume-failed and dead-letter topics.
    public let records: [KafkaMessage]
    /// `iap_reconciled_total` by outcome.
    public let reconciled: [String: Int]
    /// What the store's refunds did.
    public let refunds: Refunds
    public let elapsed: Duration

    /// The refund of a granted purchase and of a payment never seen, as the ledger recorded them.
    public struct Refunds: Sendable {
        public var revocation: RevocationRecord
        public var unseenPending: Bool
    }

    /// The ids of the item-revoked events on the topic.
    public var revokedEventIDs: [String] {
        records.filter { $0.topic == "iap.item-revoked" }.compactMap { Self.json($0)["id"] as? String }
    }

    public var grantedEventIDs: Set<String> {
        Set(records.filter { $0.topic == "iap.item-granted" }.compactMap { Self.json($0)["id"] as? String })
    }

    /// The paymentSeqs whose item-granted event says `"source": "reconciliation"`.
    public var reconciledPaymentSeqs: [String] {
        records.filter { $0.topic == "iap.item-granted" }.compactMap { record -> String? in
            guard let data = Self.json(record)["data"] as? [String: Any], data["source"] as? String == "reconciliation"
            else { return nil }
            return data["paymentSeq"] as? String
        }.sorted()
    }

    public var consumeFailedReasons: [String: Int] {
        records.filter { $0.topic == "iap.consume-failed" }.reduce(into: [:]) { counts, record in
            let reason = (Self.json(record)["data"] as? [String: Any])?["reason"] as? String ?? "?"
            counts[reason, default: 0] += 1
        }
    }

    public var deadLetterReasons: [String: Int] {
        records.filter { $0.topic == "purchase.completed.dlq" }.reduce(into: [:]) { counts, record in
            counts[record.headers.string(named: "iap-reason") ?? "?", default: 0] += 1
        }
    }

    /// The money invariants on this batch: every valid purchase granted and consumed exactly once, one event
    /// id each, nothing left over.
    public var invariantsHold: Bool {
        simulatorConsumes.count == batch.expectedGrants && simulatorConsumes.values.allSatisfy { $0 == 1 }
            && ledger.consumed == batch.expectedGrants && ledger.granted == 0
            && grantedEventIDs.count == batch.expectedGrants
            && revokedEventIDs == ["\(DemoBatch.refunded):item-revoked"] && refunds.unseenPending
    }

    public var rendered: String {
        var lines: [String] = []
        let fed = batch.kinds.map { "\($0.count) \($0.label)" }.joined(separator: ", ")
        lines.append("Fed: \(fed).")
        lines.append("")
        lines.append("Outcome                                       messages")
        lines.append(row("granted (ledger + item-granted + Consume)", outcomes["granted"] ?? 0))
        lines.append(row("duplicates ignored", outcomes["duplicate"] ?? 0))
        for (reason, count) in consumeFailedReasons.sorted(by: { $0.key < $1.key }) {
            lines.append(row("consume-failed: \(reason)", count))
        }
        for (reason, count) in deadLetterReasons.sorted(by: { $0.key < $1.key }) {
            lines.append(row("dead-lettered:  \(reason)", count))
        }
        lines.append("")
        let found = reconciledPaymentSeqs
        lines.append(
            "Reconciliation: \(calls("consumable")) List Consumables calls found \(found.count) payment(s) paid but "
                + "never reported (\(found.joined(separator: ", "))): granted through the same flow, its "
                + "item-granted event with \"source\": \"reconciliation\".")
        lines.append(
            "Refunds: the store refunded \(refunds.revocation.paymentSeq) after it was granted (read from Google Play's "
                + "Voided Purchases API by the worker's poller): its grant revoked once, \(revokedEventIDs.count) "
                + "item-revoked event (\(revokedEventIDs.joined(separator: ", "))). A refund of a payment the ledger "
                + "never saw (its RTDN on the store-notifications topic) is kept \(refunds.unseenPending ? "pending" : "NOT pending"): a purchase of it would be "
                + "rejected as `refunded`.")
        let verify = calls("payment_transaction")
        let consume = calls("consume")
        let transient = gamebaseCalls.filter { $0.key.hasSuffix("/transient") }.values.reduce(0, +)
        lines.append(
            "Gamebase: \(verify) Get Payment Transaction and \(consume) Consume calls; \(transient) failed transiently "
                + "(the injected burst) and were retried.")
        lines.append(
            "Ledger: \(ledger.consumed) purchases granted and consumed, \(ledger.granted) awaiting Consume, "
                + "\(ledger.unpublishedEvents) events unpublished.")
        lines.append(
            "Kafka: \(grantedEventIDs.count) distinct item-granted events, "
                + "\(consumeFailedReasons.values.reduce(0, +)) consume-failed events, "
                + "\(deadLetterReasons.values.reduce(0, +)) dead-letter records.")
        lines.append(
            invariantsHold
                ? "Every valid purchase was granted once, consumed once at Gamebase and announced under one event id."
                : "WARNING: the invariants do not hold on this run — please report it.")
        lines.append(
            String(
                format: "Took %.1f s.",
                elapsed.seconds))
        lines.append("")
        lines.append("Next: `iap-dev demo --keep-running` keeps the worker up and prints how to read /metrics,")
        lines.append("`iap-worker ledger show <paymentSeq>` and `iap-worker reprocess --dry-run` against it;")
        lines.append("README.md explains the flow, the configuration and how to deploy.")
        return lines.joined(separator: "\n")
    }

    private func calls(_ api: String) -> Int {
        gamebaseCalls.filter { $0.key.hasPrefix(api + "/") }.values.reduce(0, +)
    }

    private func row(_ label: String, _ count: Int) -> String {
        "  " + label.padding(toLength: 44, withPad: " ", startingAt: 0) + String(format: "%6d", count)
    }

    private static func json(_ record: KafkaMessage) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(record.value)) as? [String: Any]) ?? [:]
    }
}

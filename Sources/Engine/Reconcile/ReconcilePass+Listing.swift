import Foundation
import Fulfilment
import Gamebase
import Logging
import Wire

extension ReconcilePass {
    /// The listed items the flow can take, each as the input and message the flow will run, in paymentSeq order.
    ///
    /// Every item is held to a message's rules (the flow's own parser) before the ledger sees it: Gamebase's answer
    /// is outside data, and a value the ledger's statements cannot take (8 KB, a NUL) would otherwise fail them —
    /// the pass would end at this user every interval, and the lookup batched with the message path's would fail
    /// those too. What the parser refuses is recorded `failed` and logged (never with the token). The same
    /// paymentSeq listed twice (byte for byte) is taken once.
    func takeable(_ listed: [ConsumableItem], of user: String, report: inout Report)
        -> [(input: PurchaseInput, message: PurchaseMessage)]
    {
        var listedSeqs = Set<[UInt8]>()
        var candidates: [(input: PurchaseInput, message: PurchaseMessage)] = []
        for item in listed.sorted(by: { $0.paymentSeq.utf8.lexicographicallyPrecedes($1.paymentSeq.utf8) }) {
            guard listedSeqs.insert(Array(item.paymentSeq.utf8)).inserted else { continue }
            guard let token = item.accessToken, !token.isEmpty, !item.paymentSeq.isEmpty else {
                report.record(
                    Finding(
                        userId: user, paymentSeq: PurchaseMessage.plainIdentifier(item.paymentSeq), outcome: .failed,
                        detail: "listed without an accessToken"))
                continue
            }
            let input = Self.input(userId: user, paymentSeq: item.paymentSeq, token: token, at: clock.now)
            switch processor.parse(input) {
            case .failure(let malformed):
                // The problem names a field, never its value; the paymentSeq only when it is fit to print.
                var metadata: Logger.Metadata = ["iap.user_id": "\(user)", "iap.problem": "\(malformed.problem)"]
                if let seq = malformed.paymentSeq { metadata["iap.payment_seq"] = "\(seq)" }
                logger.warning("reconciliation skipped a listed payment the flow cannot take", metadata: metadata)
                report.record(
                    Finding(
                        userId: user, paymentSeq: malformed.paymentSeq, outcome: .failed,
                        detail: "Gamebase listed a payment the flow cannot take: \(malformed.problem)"))
            case .success(let message):
                candidates.append((input, message))
            }
        }
        return candidates
    }

    /// A listed payment as the message its user never sent. The flow's own limits apply to it: what the flow would
    /// call malformed is never handed to it (it would dead-letter it) nor to the ledger.
    static func input(userId: String, paymentSeq: String, token: String, at date: Date) -> PurchaseInput {
        var text = ""
        JSONText.appendObject(to: &text) { object in
            object.string("userId", userId)
            object.string("paymentSeq", paymentSeq)
            object.string("purchaseToken", token)
        }
        return PurchaseInput(
            key: Array(userId.utf8), value: Array(text.utf8), source: source, timestamp: date,
            origin: .reconciliation)
    }
}

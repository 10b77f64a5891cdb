import Foundation
import Fulfilment
import Gamebase

extension GamebaseComparer {
    /// Adds what Gamebase says now to every purchase found: for a paymentSeq, payment id or event id one Get Payment
    /// Transaction per purchase (List Consumables for its user where the ledger holds no token); for a userId also
    /// one List Consumables, whose payments the ledger never saw are added as purchases of their own.
    /// - Parameter history: the ledger's history of a paymentSeq, to tell a listed payment the ledger knows (on another
    ///   page of the user's purchases) from one it never saw.
    ///   - maxListed: for a userId, the most listed payments unknown to this page that are looked up (each costs a
    ///     ledger read and a Get Payment Transaction); `nil`, all.
    public func annotate(
        _ result: FindResult,
        history: @Sendable (String) async throws -> PurchaseHistory = { PurchaseHistory(paymentSeq: $0) },
        maxListed: Int? = nil
    ) async -> FindResult {
        var result = result
        var listings: [String: Result<[ConsumableItem], GamebaseError>] = [:]
        if result.kind == .userId {
            let listing = await unconsumed(userId: result.id)
            listings[result.id] = listing
            if case .success(let items) = listing {
                let known = Set(result.purchases.compactMap { $0.paymentSeq.map { Array($0.utf8) } })
                let unknown = items.filter { !known.contains(Array($0.paymentSeq.utf8)) }
                for item in unknown.prefix(maxListed ?? unknown.count) {
                    let recorded: PurchaseHistory
                    do {
                        recorded = try await history(item.paymentSeq)
                    } catch {
                        // Never "unknown to the ledger" when the ledger did not say: that would invite a grant by hand.
                        var timeline = PurchaseTimeline(
                            paymentSeq: item.paymentSeq, userId: result.id, paymentId: item.paymentId,
                            status: "paid at Gamebase; the ledger could not be read for it", entries: [])
                        timeline.gamebase = GamebaseView(
                            checkedAt: now(), listedUnconsumed: true,
                            difference: "listed unconsumed at Gamebase; whether the ledger holds it is unknown (the "
                                + "ledger could not be read: look again)")
                        result.purchases.append(timeline)
                        continue
                    }
                    if !recorded.isEmpty {
                        result.purchases.append(PurchaseTimeline(recorded))
                        continue
                    }
                    var timeline = PurchaseTimeline(
                        paymentSeq: item.paymentSeq, userId: result.id, paymentId: item.paymentId,
                        status: "paid at Gamebase, unknown to the ledger", entries: [])
                    timeline.gamebase = await unconsumedWithoutGrant(item)
                    result.purchases.append(timeline)
                }
            }
        }
        for index in result.purchases.indices where result.purchases[index].gamebase == nil {
            let purchase = result.purchases[index]
            guard let seq = purchase.paymentSeq else {
                result.purchases[index].gamebase = GamebaseView(
                    checkedAt: now(), difference: "no paymentSeq: nothing to ask Gamebase")
                continue
            }
            let history = purchase.history ?? PurchaseHistory(paymentSeq: seq)
            var listed: Result<[ConsumableItem], GamebaseError>?
            if history.grant == nil, let userId = purchase.userId {
                if listings[userId] == nil { listings[userId] = await unconsumed(userId: userId) }
                listed = listings[userId]
            }
            result.purchases[index].gamebase = await compare(history, listed: listed)
        }
        return result
    }
}

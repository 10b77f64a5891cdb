import Foundation
import Fulfilment
import Gamebase
import Wire

/// Asks Gamebase, read-only, what it says of purchases: Get Payment Transaction with the grant's token, and List
/// Consumables for the user when the ledger holds no token (never Consume).
public struct GamebaseComparer: Sendable {
    public let gamebase: any GamebaseAPI
    let now: @Sendable () -> Date

    public init(gamebase: any GamebaseAPI, now: @escaping @Sendable () -> Date = Date.init) {
        self.gamebase = gamebase
        self.now = now
    }

    /// The user's unconsumed payments, or the error that kept Gamebase from saying.
    public func unconsumed(userId: String) async -> Result<[ConsumableItem], GamebaseError> {
        do {
            return .success(
                try await gamebase.listConsumables(
                    userId: userId, marketIds: nil, transactionID: GamebaseTransactionID()))
        } catch {
            return .failure(error)
        }
    }

    /// Compares one purchase; `listed` is its user's List Consumables answer when the caller has it.
    public func compare(_ history: PurchaseHistory, listed: Result<[ConsumableItem], GamebaseError>?) async
        -> GamebaseView
    {
        let date = now()
        if let grant = history.grant {
            do {
                let payment = GamebaseView.Payment(
                    try await gamebase.paymentTransaction(
                        accessToken: grant.purchaseToken, transactionID: GamebaseTransactionID()))
                return GamebaseView(checkedAt: date, payment: payment, difference: Self.difference(grant, payment))
            } catch {
                return Self.failed(error, at: date, context: "the granted payment")
            }
        }
        guard let paymentSeq = history.paymentSeq else {
            return GamebaseView(checkedAt: date, difference: "no paymentSeq: nothing to ask Gamebase")
        }
        guard let userId = history.userId else {
            return GamebaseView(checkedAt: date, difference: "no userId known here: nothing to ask Gamebase")
        }
        let answer: Result<[ConsumableItem], GamebaseError>
        if let listed { answer = listed } else { answer = await unconsumed(userId: userId) }
        switch answer {
        case .failure(let error):
            return Self.failed(error, at: date, context: "List Consumables for userId \(userId)")
        case .success(let items):
            guard let item = items.first(where: { $0.paymentSeq.hasSameBytes(as: paymentSeq) }) else {
                let consumed = history.rejections.contains {
                    $0.record.reason == ConsumeFailureReason.consumedWithoutGrant.rawValue
                }
                let difference =
                    consumed
                    ? "consumed at Gamebase, no grant here"
                    : "not unconsumed at Gamebase for userId \(userId) (consumed, refunded or never paid), no grant here"
                return GamebaseView(checkedAt: date, listedUnconsumed: false, difference: difference)
            }
            return await unconsumedWithoutGrant(item, at: date)
        }
    }

    /// A payment List Consumables lists that the ledger did not grant.
    public func unconsumedWithoutGrant(_ item: ConsumableItem, at date: Date? = nil) async -> GamebaseView {
        let date = date ?? now()
        var payment: GamebaseView.Payment?
        if let token = item.accessToken, !token.isEmpty {
            payment = try? GamebaseView.Payment(
                await gamebase.paymentTransaction(accessToken: token, transactionID: GamebaseTransactionID()))
        }
        return GamebaseView(
            checkedAt: date, payment: payment, listedUnconsumed: true,
            difference: "paid and unconsumed at Gamebase, no grant here")
    }

    static func difference(_ grant: GrantRecord, _ payment: GamebaseView.Payment) -> String {
        if !payment.userId.hasSameBytes(as: grant.userId) {
            return "Gamebase names userId \(payment.userId) as the payer; granted here to \(grant.userId)"
        }
        switch (grant.state, payment.isConsumable) {
        case (.granted, true): return "granted, Consume still pending"
        case (.granted, _): return "consumed at Gamebase, not yet marked consumed here (the sweeper records it)"
        case (.consumed, true): return "marked consumed here, unconsumed at Gamebase"
        case (.consumed, _): return "no difference: granted and consumed"
        }
    }

    static func failed(_ error: any Error, at date: Date, context: String) -> GamebaseView {
        guard let error = error as? GamebaseError else {
            return GamebaseView(
                checkedAt: date, error: "\(type(of: error))", difference: "Gamebase could not be asked",
                unreachable: true)
        }
        let unreachable = error.kind == .transient || error.kind == .configuration
        let code = error.resultCode.map { " (resultCode \($0))" } ?? ""
        return GamebaseView(
            checkedAt: date, error: "\(error.code)\(code)",
            difference: unreachable
                ? "Gamebase could not be asked about \(context)" : "Gamebase refuses \(context)\(code)",
            unreachable: unreachable)
    }
}

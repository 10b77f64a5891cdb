import Foundation
import Fulfilment
import Gamebase

/// What Gamebase says of a purchase now, beside what the ledger says, and the difference in one line.
public struct GamebaseView: Sendable, Hashable {
    /// What Gamebase's Get Payment Transaction answered (no token); `find --json` prints it as it is.
    public struct Payment: Sendable, Hashable, Codable {
        public var paymentSeq: String
        public var userId: String
        public var gamebaseProductId: String?
        public var marketId: String?
        public var price: String?
        public var currency: String?
        public var paymentId: String?
        public var isConsumable: Bool?
        public var isTestPurchase: Bool?

        public init(_ transaction: PaymentTransaction) {
            paymentSeq = transaction.paymentSeq
            userId = transaction.userId
            gamebaseProductId = transaction.gamebaseProductId
            marketId = transaction.marketId
            price = transaction.price.map { "\($0)" }
            currency = transaction.currency
            paymentId = transaction.paymentId
            isConsumable = transaction.isConsumable
            isTestPurchase = transaction.isTestPurchase
        }
    }

    public var checkedAt: Date
    /// The answer of Get Payment Transaction, when one was asked and answered.
    public var payment: Payment?
    /// Whether List Consumables lists it unconsumed for its user (`nil`: not asked).
    public var listedUnconsumed: Bool?
    /// A refusal or failure of Gamebase's (never a token or key).
    public var error: String?
    /// The difference between Gamebase and the ledger, in one line.
    public var difference: String
    /// Whether Gamebase could not be asked (timeout, connection, server error): `find` then exits 2.
    public var unreachable: Bool

    public init(
        checkedAt: Date, payment: Payment? = nil, listedUnconsumed: Bool? = nil, error: String? = nil, difference: String,
        unreachable: Bool = false
    ) {
        self.checkedAt = checkedAt
        self.payment = payment
        self.listedUnconsumed = listedUnconsumed
        self.error = error
        self.difference = difference
        self.unreachable = unreachable
    }
}

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
            return .success(try await gamebase.listConsumables(userId: userId, marketIds: nil, transactionID: GamebaseTransactionID()))
        } catch {
            return .failure(error)
        }
    }

    /// Compares one purchase; `listed` is its user's List Consumables answer when the caller has it.
    public func compare(_ history: PurchaseHistory, listed: Result<[ConsumableItem], GamebaseError>?) async -> GamebaseView {
        let date = now()
        if let grant = history.grant {
            do {
                let payment = GamebaseView.Payment(
                    try await gamebase.paymentTransaction(accessToken: grant.purchaseToken, transactionID: GamebaseTransactionID()))
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
                let consumed = history.rejections.contains { $0.record.reason == ConsumeFailureReason.consumedWithoutGrant.rawValue }
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
            return GamebaseView(checkedAt: date, error: "\(type(of: error))", difference: "Gamebase could not be asked", unreachable: true)
        }
        let unreachable = error.kind == .transient || error.kind == .configuration
        let code = error.resultCode.map { " (resultCode \($0))" } ?? ""
        return GamebaseView(
            checkedAt: date, error: "\(error.code)\(code)",
            difference: unreachable ? "Gamebase could not be asked about \(context)" : "Gamebase refuses \(context)\(code)",
            unreachable: unreachable)
    }
}

extension GamebaseComparer {
    /// Adds what Gamebase says now to every purchase found: for a paymentSeq, payment id or event id one Get Payment
    /// Transaction per purchase (List Consumables for its user where the ledger holds no token); for a userId also
    /// one List Consumables, whose payments the ledger never saw are added as purchases of their own.
    /// - Parameter history: the ledger's history of a paymentSeq, to tell a listed payment the ledger knows (on another
    ///   page of the user's purchases) from one it never saw.
    public func annotate(
        _ result: FindResult, history: @Sendable (String) async throws -> PurchaseHistory = { PurchaseHistory(paymentSeq: $0) }
    ) async -> FindResult {
        var result = result
        var listings: [String: Result<[ConsumableItem], GamebaseError>] = [:]
        if result.kind == .userId {
            let listing = await unconsumed(userId: result.id)
            listings[result.id] = listing
            if case .success(let items) = listing {
                let known = Set(result.purchases.compactMap { $0.paymentSeq.map { Array($0.utf8) } })
                for item in items where !known.contains(Array(item.paymentSeq.utf8)) {
                    if let recorded = try? await history(item.paymentSeq), !recorded.isEmpty {
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
                result.purchases[index].gamebase = GamebaseView(checkedAt: now(), difference: "no paymentSeq: nothing to ask Gamebase")
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

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
        checkedAt: Date, payment: Payment? = nil, listedUnconsumed: Bool? = nil, error: String? = nil,
        difference: String,
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

/// A payment as both a grant and a store notification name it: Gamebase's store code (`marketId`) and the store's
/// payment id (Apple's `transactionId`, Google's `orderId`).
public struct StorePaymentKey: Sendable, Hashable {
    public var marketId: String
    public var paymentId: String

    public init(marketId: String, paymentId: String) {
        self.marketId = marketId
        self.paymentId = paymentId
    }

    /// The grant's key, when it has both parts.
    public init?(_ grant: GrantRecord) {
        guard let marketId = grant.marketId, let paymentId = grant.paymentId else { return nil }
        self.init(marketId: marketId, paymentId: paymentId)
    }
}

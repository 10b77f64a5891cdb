/// The Gamebase server API calls of the consume flow. ``GamebaseClient`` implements it over HTTP; tests of
/// the flow implement it in memory.
public protocol GamebaseAPI: Sendable {
    /// Get Payment Transaction: the payment that `accessToken` (the SDK's `purchaseToken`) belongs to.
    /// - Throws: ``GamebaseError``.
    func paymentTransaction(accessToken: String, transactionID: GamebaseTransactionID) async throws(GamebaseError)
        -> PaymentTransaction

    /// Consume: marks the payment consumed. `5018` (already consumed) is returned as `.alreadyConsumed`.
    /// - Throws: ``GamebaseError``; on `.timeout` the consume may have applied.
    func consume(paymentSeq: String, accessToken: String, transactionID: GamebaseTransactionID) async throws(GamebaseError)
        -> ConsumeOutcome

    /// List Consumables: the user's completed but unconsumed payments, optionally for some stores only.
    func listConsumables(userId: String, marketIds: [String]?, transactionID: GamebaseTransactionID) async throws(GamebaseError)
        -> [ConsumableItem]
}

/// The `X-TCGB-Transaction-Id` of one logical operation, reused across its retries.
public struct GamebaseTransactionID: Hashable, Sendable, CustomStringConvertible {
    public let value: String
    public init(_ value: String) { self.value = value }
    /// A fresh random id.
    public init() { self.value = RandomUUID.string() }
    public var description: String { value }
}

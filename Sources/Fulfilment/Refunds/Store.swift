/// An app store whose refunds the worker takes in.
public enum Store: String, Sendable, Hashable, CaseIterable {
    case apple
    case google

    /// Gamebase's store code for it (`marketId`), which the ledger keeps with each grant beside the store's payment
    /// id: a refund is matched to a grant by both.
    public var marketId: String {
        switch self {
        case .apple: "AS"
        case .google: "GG"
        }
    }

    /// The store of a Gamebase store code, for the two whose refunds the worker reads.
    public init?(marketId: String) {
        guard let store = Self.allCases.first(where: { $0.marketId == marketId }) else { return nil }
        self = store
    }
}

/// How the worker learned of a purchase: a purchase-completed message, or the reconciler's list of unconsumed
/// payments at Gamebase (List Consumables). The item-granted event says it in `data.source`.
public enum PurchaseOrigin: String, Sendable, Hashable, Codable, CaseIterable {
    case message
    case reconciliation
}

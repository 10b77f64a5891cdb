import Foundation
import Fulfilment

/// What `find` found for one identifier.
public struct FindResult: Sendable, Hashable {
    public var id: String
    /// What the identifier was taken to be; `nil` when nothing was found under any kind.
    public var kind: IdentifierKind?
    public var purchases: [PurchaseTimeline]
    /// For a userId with more purchases than the page: the `--before` of the next page (``CursorText`` writes it).
    public var nextBefore: PurchaseCursor?

    public init(id: String, kind: IdentifierKind?, purchases: [PurchaseTimeline], nextBefore: PurchaseCursor? = nil) {
        self.id = id
        self.kind = kind
        self.purchases = purchases
        self.nextBefore = nextBefore
    }
}

import Foundation

/// What `find` found for one identifier.
public struct FindResult: Sendable, Hashable {
    public var id: String
    /// What the identifier was taken to be; `nil` when nothing was found under any kind.
    public var kind: IdentifierKind?
    public var purchases: [PurchaseTimeline]
    /// For a userId with more purchases than the page: the `--before` of the next page.
    public var nextBefore: Date?

    public init(id: String, kind: IdentifierKind?, purchases: [PurchaseTimeline], nextBefore: Date? = nil) {
        self.id = id
        self.kind = kind
        self.purchases = purchases
        self.nextBefore = nextBefore
    }
}

import Foundation

/// Google Play's Voided Purchases API (`purchases.voidedpurchases.list`): one page of the app's voided purchases —
/// refunds, cancellations, chargebacks, quantity-based partial refunds — the earliest first. The client classifies its
/// failures as the history poller acts on them (``StoreHistoryError``): a refused page token, a spent quota, anything
/// else.
public protocol VoidedPurchasesAPI: Sendable {
    func voidedPurchases(_ request: VoidedPurchasesRequest) async throws(StoreHistoryError) -> VoidedPurchasesPage
}

/// The voided purchases from `startTime` to `endTime` (Google shows only the last 30 days), from the page `pageToken`
/// names (`nil`: the first).
public struct VoidedPurchasesRequest: Sendable, Hashable {
    public var startTime: Date
    public var endTime: Date
    public var pageToken: String?

    public init(startTime: Date, endTime: Date, pageToken: String? = nil) {
        self.startTime = startTime
        self.endTime = endTime
        self.pageToken = pageToken
    }
}

/// A page of voided purchases: each entry the JSON object Google sent (read by the Stores module, which refuses what it
/// cannot believe), and the next page's token while there is one.
public struct VoidedPurchasesPage: Sendable, Hashable {
    public var entries: [[UInt8]]
    public var nextPageToken: String?

    public init(entries: [[UInt8]], nextPageToken: String?) {
        self.entries = entries
        self.nextPageToken = nextPageToken
    }
}

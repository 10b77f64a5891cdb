import Foundation
import Fulfilment

/// Google Play's Voided Purchases API as a store history (``StoreHistorySource``): one stream, `voided`, of the
/// app's voided purchases and quantity-based partial refunds over the 30 days Google shows, each entry read by
/// ``GoogleNotification/voidedPurchase(_:packageName:)``.
public struct GoogleVoidedPurchases: StoreHistorySource {
    /// The 30 days of voided purchases the API shows.
    public static let history: Duration = .seconds(30 * 86_400)

    let api: any VoidedPurchasesAPI
    /// `refunds.google.package_name`.
    let packageName: String
    public var store: Store { .google }
    public var streams: [String] { ["voided"] }
    public var historyKept: Duration { Self.history }

    public init(api: any VoidedPurchasesAPI, packageName: String) {
        self.api = api
        self.packageName = packageName
    }

    public func page(_ request: HistoryPageRequest, receivedAt: Date) async throws(StoreHistoryError) -> HistoryPage {
        // An endTime past Google's own clock is not asked for: ten seconds short of the window's end, which is when its
        // reading began on this host (an NTP-synced clock is far closer to Google's); what those seconds hold, the next
        // window's overlap reads. Derived from the window alone, it is the same on every page: Google takes a page
        // token only with the query that gave it.
        let end = max(request.start, request.end.addingTimeInterval(-10))
        let page = try await api.voidedPurchases(
            VoidedPurchasesRequest(startTime: request.start, endTime: end, pageToken: request.pageToken))
        let items = page.entries.map { entry in
            let read = GoogleNotification.voidedPurchase(entry, packageName: packageName)
            return HistoryPage.Item(
                read: read.map { ReadNotification(notification: $0, channel: .googleVoidedPurchasesAPI) }
                    .mapError(StoreNotificationReader.refusal),
                body: entry, time: try? read.get().occurredAt)
        }
        return HistoryPage(items: items, nextPageToken: page.nextPageToken)
    }
}

import Foundation

/// `POST /inApps/v1/notifications/history`: a window of at most 180 days, one notification type, and the page to
/// continue from.
public struct NotificationHistoryRequest: Sendable, Hashable {
    public var startDate: Date
    public var endDate: Date
    /// Apple's `notificationType` (`REFUND`, `REFUND_REVERSED`, `REFUND_DECLINED`, `CONSUMPTION_REQUEST`).
    public var notificationType: String
    /// The previous page's token; `nil` for the first page of the window.
    public var paginationToken: String?

    public init(startDate: Date, endDate: Date, notificationType: String, paginationToken: String? = nil) {
        self.startDate = startDate
        self.endDate = endDate
        self.notificationType = notificationType
        self.paginationToken = paginationToken
    }
}

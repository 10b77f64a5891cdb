/// How a store notification reached the worker: the `source` of its revocation events (DESIGN §2).
public enum NotificationChannel: String, Sendable, Hashable, CaseIterable {
    /// Read by the worker's own poller from Apple's Get Notification History.
    case appleNotificationHistory = "apple-notification-history"
    /// An App Store Server Notification V2 the studio received and put on the store-notifications topic.
    case appleNotification = "apple-notification"
    /// A Google Play real-time developer notification from the store-notifications topic.
    case googleRTDN = "google-rtdn"
    /// Read by the worker's own poller from Google Play's Voided Purchases API.
    case googleVoidedPurchasesAPI = "google-voided-purchases-api"
}

import Foundation

/// The two calls of Apple's App Store Server API the worker makes with the studio's In-App Purchase key: Get
/// Notification History (the poller's source of refunds) and Send Consumption Information (the answer to a
/// `CONSUMPTION_REQUEST`). The HTTP adapter signs each call; tests and the demo give the App Store simulator.
public protocol AppStoreServerAPI: Sendable {
    /// One page of notification history.
    func notificationHistory(_ request: NotificationHistoryRequest) async throws(AppStoreError)
        -> NotificationHistoryPage

    /// Sends consumption information for a transaction Apple asked about.
    func sendConsumptionInformation(transactionId: String, _ information: ConsumptionInformation)
        async throws(AppStoreError)
}

import Foundation

/// Google Play's real-time developer notifications as the tests send them: a voided purchase, bare or in the Pub/Sub
/// envelope Kafka Connect's source connector writes.
enum GoogleNotifications {
    /// The package name the tests' workers are configured for.
    static let package = "com.studio.game"

    static func voided(
        _ orderId: String, package: String = GoogleNotifications.package, time: Int64 = 1_764_000_000_123,
        refundType: Int = 1
    ) -> String {
        """
        {"version":"1.0","packageName":"\(package)","eventTimeMillis":"\(time)",\
        "voidedPurchaseNotification":{"purchaseToken":"play-token-\(orderId)","orderId":"\(orderId)",\
        "productType":2,"refundType":\(refundType)}}
        """
    }

    /// The Pub/Sub message shape Kafka Connect's source connector may write: the same notification, base64.
    static func pubSub(_ notification: String, messageId: String) -> String {
        #"{"data":"\#(Data(notification.utf8).base64EncodedString())","messageId":"\#(messageId)"}"#
    }
}

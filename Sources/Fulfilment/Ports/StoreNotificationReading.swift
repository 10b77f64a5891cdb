import Foundation

/// Reads a store-notifications record (a Google RTDN message, or an Apple V2 body `{"signedPayload": …}`) into a
/// believed notification, or says why it is refused. Implemented by the Stores module (Apple's JWS verified before
/// anything in it is believed); the intake and its tests see only this.
public protocol StoreNotificationReading: Sendable {
    func read(_ bytes: [UInt8], receivedAt: Date) async -> Result<ReadNotification, NotificationRefusal>
}

import Foundation

/// A notification read and believed, and how it came.
public struct ReadNotification: Sendable, Hashable {
    public var notification: StoreNotification
    public var channel: NotificationChannel

    public init(notification: StoreNotification, channel: NotificationChannel) {
        self.notification = notification
        self.channel = channel
    }
}

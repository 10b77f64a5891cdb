import Foundation
import Logging

/// Takes in one believed store notification (DESIGN §2): records it and carries it out in one ledger transaction
/// (``RefundLedger``), then publishes the events that transaction wrote and marks them published. Idempotent: the same
/// notification again, however it comes, records and publishes nothing new.
///
/// It throws only when the ledger or the publisher fails; the notification is then not finished and must be read again
/// (its offset not stored, its history page not passed). Events written but not published when it fails (or the worker
/// dies) are published by the sweeper under the same ids.
public struct RefundRecorder: Sendable {
    public let refunds: any RefundLedger
    /// For marking events published.
    public let purchases: any PurchaseLedger
    public let publisher: any EventPublisher
    public let events: EventFactory
    public let clock: any WorkerClock
    public let logger: Logger

    public init(
        refunds: any RefundLedger, purchases: any PurchaseLedger, publisher: any EventPublisher, events: EventFactory,
        clock: any WorkerClock = .system, logger: Logger
    ) {
        self.refunds = refunds
        self.purchases = purchases
        self.publisher = publisher
        self.events = events
        self.clock = clock
        self.logger = logger
    }

    /// Records `notification`, received through `channel`, and publishes what it revoked or reversed.
    @discardableResult
    public func record(_ notification: StoreNotification, channel: NotificationChannel) async throws
        -> RefundRecording
    {
        let now = clock.now
        let recording = try await refunds.record(
            StoreNotificationRecord(notification: notification, channel: channel, receivedAt: now), events: events,
            now: now)
        for event in recording.events {
            try await publisher.publish(OutboundRecord(event))
            try await purchases.markPublished(eventID: event.id, at: clock.now)
        }
        if !recording.duplicate {
            logger.info(
                "store notification recorded",
                metadata: [
                    "iap.store": "\(notification.store.rawValue)",
                    "iap.notification_id": "\(notification.notificationId)",
                    "iap.notification_kind": "\(notification.kind.rawValue)",
                    "iap.outcome": "\(recording.outcome.rawValue)",
                    "iap.payment_seq": "\(recording.paymentSeq ?? "-")",
                ])
        }
        return recording
    }
}

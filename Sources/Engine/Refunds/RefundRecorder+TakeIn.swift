import Foundation
import Fulfilment

extension RefundRecorder {
    /// Takes in what a reader made of one body, as the intake and the history pollers do: a believed
    /// notification recorded and carried out, a refusal kept once per body; either counted in
    /// `iap_store_notifications_total` (and a revocation in `iap_revocations_total`). Answers the refusal, if any, for
    /// the caller to log with its own context. Throws what the ledger or the publisher threw.
    /// - Parameter source: where the body came from (``RefusedNotification/Source``), kept with a refusal.
    func takeIn(
        _ read: Result<ReadNotification, NotificationRefusal>, body: [UInt8], source: String,
        metrics: any EngineMetrics, unknownStore: String = "unknown"
    ) async throws -> NotificationRefusal? {
        switch read {
        case .success(let read):
            let notification = read.notification
            // Counted once committed, before publishing (which may fail: the notification is read again then, a
            // duplicate that revokes nothing new).
            let recording = try await store(notification, channel: read.channel)
            metrics.countStoreNotification(
                store: notification.store.rawValue, type: notification.kind.rawValue,
                result: recording.duplicate ? "duplicate" : recording.outcome.rawValue)
            for revocation in recording.revocations {
                metrics.countRevocation(store: revocation.store.rawValue, reason: revocation.reason)
            }
            try await publishEvents(of: recording)
            return nil
        case .failure(let refusal):
            let (refunds, refused) = (
                refunds, RefusedNotification(body: body, refusal: refusal, receivedAt: clock.now, source: source)
            )
            try await deadline.run("record a refused notification") { try await refunds.recordRefusal(refused) }
            metrics.countStoreNotification(
                store: refusal.store?.rawValue ?? unknownStore, type: "unknown", result: "refused_\(refusal.code)")
            return refusal
        }
    }
}

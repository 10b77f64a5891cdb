import Foundation
import Logging

/// Takes in one believed store notification (DESIGN §2): records it and carries it out in one ledger transaction
/// (``RefundRecordingLedger``), then publishes the events that transaction wrote and marks them published. Idempotent: the same
/// notification again, however it comes, records and publishes nothing new.
///
/// It throws only when the ledger or the publisher fails; the notification is then not finished and must be read again
/// (its offset not stored, its history page not passed). Events written but not published when it fails (or the worker
/// dies) are published by the sweeper under the same ids.
public struct RefundRecorder: Sendable {
    public let refunds: any RefundRecordingLedger
    /// For marking events published.
    public let purchases: any PurchaseLedger
    public let publisher: any EventPublisher
    public let events: EventFactory
    public let clock: any WorkerClock
    public let logger: Logger
    /// The deadline of each ledger call: a database that stops answering is a failure to retry, never a hang.
    public let deadline: LedgerDeadline

    public init(
        refunds: any RefundRecordingLedger, purchases: any PurchaseLedger, publisher: any EventPublisher,
        events: EventFactory,
        deadline: LedgerDeadline = LedgerDeadline(), clock: any WorkerClock = .system, logger: Logger
    ) {
        self.deadline = deadline
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
        let recording = try await store(notification, channel: channel)
        try await publishEvents(of: recording)
        return recording
    }

    /// Records `notification` in the ledger, carried out, without publishing its events (``publishEvents(of:)``).
    package func store(_ notification: StoreNotification, channel: NotificationChannel) async throws -> RefundRecording
    {
        let now = clock.now
        let (refunds, events) = (refunds, events)
        let record = StoreNotificationRecord(notification: notification, channel: channel, receivedAt: now)
        let recording = try await deadline.run("record a store notification") {
            try await refunds.record(record, events: events, now: now)
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

    /// Settles refunds left pending beside a grant of their payment (``RefundRecordingLedger/settlePendingRefunds(limit:events:now:)``)
    /// and publishes what that revoked; answers what each payment's settlement did, and gives each to `onSettled` once it
    /// is committed, before publishing. A partial refund read before its
    /// purchase is settled here as a rule; a whole one only when a grant missed it (an older instance's).
    public func settlePendingRefunds(
        limit: Int, onSettled: @Sendable (RefundRecording) -> Void = { _ in }
    ) async throws -> [RefundRecording] {
        let (refunds, events, now) = (refunds, events, clock.now)
        let settled = try await deadline.run("settle pending refunds") {
            try await refunds.settlePendingRefunds(limit: limit, events: events, now: now)
        }
        // Each settlement is committed: said (counted) before anything is published, which may fail.
        for recording in settled { onSettled(recording) }
        for recording in settled {
            logger.info(
                "a refund kept pending until its payment was granted was settled",
                metadata: [
                    "iap.payment_seq": "\(recording.paymentSeq ?? "-")", "iap.outcome": "\(recording.outcome.rawValue)",
                ])
            try await publishEvents(of: recording)
        }
        return settled
    }

    /// Publishes the events a recording wrote, after any earlier event of the same grant a crash left unpublished —
    /// its item-granted event, then its earlier revocations and reversals in the order they were written (by number, a
    /// revocation before its reversal) — so a game hears of a grant's changes in the order they happened: never of a
    /// revocation before the grant, never of a reversal before the revocation it undoes. (The sweeper publishes what is
    /// left after a crash too; the next recording of the grant's payment puts its earlier events first.)
    package func publishEvents(of recording: RefundRecording) async throws {
        guard !recording.events.isEmpty else { return }
        if let paymentSeq = recording.paymentSeq {
            let (purchases, refunds) = (purchases, refunds)
            let grant = try await deadline.run("read a grant") { try await purchases.grant(paymentSeq: paymentSeq) }
            var earlier: [String] = []
            if let grant, grant.eventPublishedAt == nil {
                earlier.append(EventFactory.itemGrantedID(paymentSeq: paymentSeq))
            }
            let own = Set(recording.events.map(\.id))
            let revocations = try await deadline.run("read a grant's revocations") {
                try await refunds.revocations(paymentSeq: paymentSeq)
            }
            for revocation in revocations {
                earlier.append(EventFactory.itemRevokedID(paymentSeq: paymentSeq, number: revocation.number))
                if revocation.reversedBy != nil {
                    earlier.append(EventFactory.refundReversedID(paymentSeq: paymentSeq, number: revocation.number))
                }
            }
            // Only what comes before the recording's own events: one another instance wrote after it (a reversal of
            // this very revocation) goes out after it, by that instance.
            for id in earlier {
                if own.contains(id) { break }
                if let event = try await deadline.run("read an event", { try await purchases.event(id: id) }),
                    event.publishedAt == nil
                {
                    try await publish(event)
                }
            }
        }
        for event in recording.events { try await publish(event) }
    }

    /// Publishes an outbox event and marks it published.
    func publish(_ event: OutboxEvent) async throws {
        try await publisher.publish(OutboundRecord(event))
        let (purchases, at) = (purchases, clock.now)
        try await deadline.run("mark an event published") {
            try await purchases.markPublished(eventID: event.id, at: at)
        }
    }
}

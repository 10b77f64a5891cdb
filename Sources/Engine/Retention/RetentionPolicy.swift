import Foundation
import Fulfilment

/// `ledger.retention.*`: how long each kind of row the ledger keeps lives, and how the pruner goes about it. Grants
/// are not here: they are the idempotency record of their paymentSeq and are kept.
public struct RetentionPolicy: Sendable, Hashable {
    /// Between pruning passes; `nil`: pruning is off (nothing is ever removed).
    public var interval: Duration? = .milliseconds(300_000)
    /// Rows deleted per transaction.
    public var batchRows = 1_000
    /// Published outbox rows (0: kept).
    public var publishedOutboxHours = 72
    /// Rejections Gamebase confirmed as the claimant's (0: kept).
    public var rejectionsDays = 30
    /// Rejections nobody confirmed (0: kept, still under the count bound).
    public var unconfirmedRejectionsHours = 24
    /// Recorded dead letters (0: kept, malformed ones still under the count bound).
    public var deadLettersDays = 30
    /// Store notifications that changed nothing and are no refund, and refused notifications (0: kept, refused ones
    /// still under the count bound).
    public var storeNotificationsDays = 30
    /// At most this many unconfirmed rejections, as many dead letters of malformed records, as many refused
    /// notifications and as many store notifications that changed nothing (0: no bound).
    public var maxUnconfirmedRows = 1_000_000
    /// The reconciler's state (users not active within it, sightings older than it): `reconcile.lookback_hours`.
    public var reconciliationWindow: Duration = .seconds(72 * 3_600)

    /// The first pass after start.
    public var firstPassDelay: Duration = .seconds(30)

    public init() {}

    /// The age limit of each kind of row, `nil` where it is kept for ever.
    public func maximumAge(of rows: PrunableRows) -> Duration? {
        func hours(_ count: Int) -> Duration? { count > 0 ? .seconds(count * 3_600) : nil }
        switch rows {
        case .publishedOutbox: return hours(publishedOutboxHours)
        case .confirmedRejections: return hours(rejectionsDays * 24)
        case .unconfirmedRejections: return hours(unconfirmedRejectionsHours)
        case .deadLetters: return hours(deadLettersDays * 24)
        case .malformedDeadLetters: return nil
        case .reconcileUsers, .reconcileSightings: return reconciliationWindow
        case .otherNotifications, .refusedNotifications: return hours(storeNotificationsDays * 24)
        }
    }

    /// The count bound of each kind of row an outsider can cause without a payment, `nil` for the others.
    public func maximumCount(of rows: PrunableRows) -> Int? {
        switch rows {
        case .unconfirmedRejections, .malformedDeadLetters, .refusedNotifications, .otherNotifications:
            maxUnconfirmedRows > 0 ? maxUnconfirmedRows : nil
        default: nil
        }
    }
}

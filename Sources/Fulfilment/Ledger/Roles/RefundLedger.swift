import Foundation

/// The ledger's roles for the stores' refunds, one per consumer: recording notifications (``RefundRecordingLedger``,
/// the intake's and the pollers' recorder, the sweeper's backstop), the history pollers' positions
/// (``HistoryPositionLedger``), App Store consumption requests (``ConsumptionRequestLedger``), and what people read
/// (``RefundHistoryLedger``). Every ledger plays them all.
public protocol RefundLedger: RefundRecordingLedger, HistoryPositionLedger, ConsumptionRequestLedger {}

/// Notifications recorded, each once (by its notification id), and carried out by its ``RefundPlan`` in the same
/// transaction — a revocation and its outbox event, a reversal, a pending refund that the grant path then honours
/// (``PurchaseLedger/insertGrants(_:)`` answers `.refunded`).
///
/// On PostgreSQL a notification and a grant of the same payment take the same transaction-scoped lock (the store code
/// and payment id, hashed), so a refund recorded while the purchase is being granted is seen by one side or the
/// other: never a pending refund beside a grant it missed.
///
/// Every method throws ``LedgerError``.
public protocol RefundRecordingLedger: RefundHistoryLedger {
    /// Records `record` (its outcome and paymentSeq are the plan's) and carries out what ``RefundPlan/decide`` decides
    /// from the ledger's state, in one transaction. A notification id recorded already changes nothing and answers
    /// `duplicate` with the outcome it had.
    func record(_ record: StoreNotificationRecord, events: EventFactory, now: Date) async throws -> RefundRecording

    /// The backstop of the payment lock: refunds still `pending` while a grant of their payment exists (granted by an
    /// instance of a version before refunds, or by any path that missed the lock) are decided again, each in its own
    /// transaction under the lock, and carried out as when they arrived — at most `limit` of them; their recordings.
    func settlePendingRefunds(limit: Int, events: EventFactory, now: Date) async throws -> [RefundRecording]

    /// Keeps a refused record: the first of its body inserted, a repeat counted (`count`, `lastReceivedAt`), where it
    /// came from (`source`) the latest place it was read.
    func recordRefusal(_ refusal: RefusedNotification) async throws
}

/// Where the pollers of the stores' histories stand (``HistoryPollMark``), one position per store and stream, so
/// restarts and other instances resume from it; on PostgreSQL one instance at a time holds each (a lease).
///
/// Every method throws ``LedgerError``.
public protocol HistoryPositionLedger: Sendable {
    /// Takes (or renews) the lease of the named history position until `until`: the position, or `nil` while another
    /// owner's lease runs. A lease ending beyond ``LeaseEnd/latest(now:until:)`` has ended (a clock stepped back since).
    func claimHistoryPoll(name: String, owner: String, until: Date, now: Date) async throws -> HistoryPollMark?

    /// Saves the position, only while `owner` holds its lease: `false` when another owner took it over meanwhile. The
    /// lease is held on until `leaseUntil` (a pass that reads on renews it page by page), or given up when `nil` (the
    /// window read to its end: any instance may take the next pass at once, a restarted one too).
    func saveHistoryPoll(_ mark: HistoryPollMark, owner: String, leaseUntil: Date?) async throws -> Bool

    /// Every history position, by name.
    func historyPolls() async throws -> [HistoryPollMark]
}

/// App Store consumption requests to answer, one instance at a time, and the delivery evidence an answer gives.
///
/// Every method throws ``LedgerError``.
public protocol ConsumptionRequestLedger: Sendable {
    /// Claims App Store consumption requests to answer, until `until`: those not past their deadline with no answer
    /// yet, and pending ones whose next attempt is due (one instance answers each at a time) — at most `limit`, the
    /// nearest deadline first.
    func claimConsumptionRequests(now: Date, until: Date, limit: Int) async throws -> [ConsumptionRequest]

    /// Records what an attempt at answering did (the row's state, delivery status, attempts, error, times), only while
    /// `request`'s claim stands: `false` when it lapsed and another claimer may have answered meanwhile.
    func recordConsumptionAnswer(_ answer: ConsumptionAnswer, claim request: ConsumptionRequest) async throws -> Bool

    /// The nearest deadline of a consumption request not answered yet (and not given up), if any.
    func nearestConsumptionDeadline(now: Date) async throws -> Date?

    /// The grant of a store payment, if any: the delivery evidence a consumption answer gives.
    func grant(paymentKey: StorePaymentKey) async throws -> GrantRecord?
}

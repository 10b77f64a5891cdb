import Foundation
import Gamebase

/// What a reconciliation pass asks about its dependencies before and after calling them.
///
/// In the daemon it is the worker's own monitors (``WorkerReconcileHealth``): the reconciler never calls Gamebase
/// while the circuit is open or the worker is stopped by a configuration failure, and never uses a ledger the
/// worker knows is down. `iap-worker reconcile` has no monitors and asks Gamebase directly
/// (``StandaloneReconcileHealth``).
public protocol ReconcileHealth: Sendable {
    /// Whether Gamebase may be called now.
    var allowsGamebaseCalls: Bool { get }
    /// Whether the ledger is believed to answer.
    var ledgerAvailable: Bool { get }
    /// How long purchase messages have been processed without a pause (intake not held), on the monotonic clock;
    /// `nil` while paused. A payment is taken only once this, too, is a grace period, so messages held back by an
    /// outage are not raced when it ends.
    var processingFor: Duration? { get }
    /// After a call failed transiently through its retries: does Gamebase answer at all?
    func verdictAfterFailure() async -> GamebaseProbeVerdict
    /// Gamebase refused the worker's configuration.
    func configurationRejected(_ error: GamebaseError)
    /// A ledger call failed.
    func ledgerFailed(_ error: any Error) async
}

/// The daemon's: the monitors that also hold intake.
struct WorkerReconcileHealth: ReconcileHealth {
    let gamebaseMonitor: GamebaseMonitor
    let ledgerMonitor: LedgerMonitor
    let intake: IntakeSwitch

    var allowsGamebaseCalls: Bool { gamebaseMonitor.allowsCalls }
    var ledgerAvailable: Bool { ledgerMonitor.isAvailable }
    var processingFor: Duration? { intake.flowingFor }
    func verdictAfterFailure() async -> GamebaseProbeVerdict { await gamebaseMonitor.verdictAfterFailure() }
    func configurationRejected(_ error: GamebaseError) { gamebaseMonitor.configurationRejected(error) }
    func ledgerFailed(_ error: any Error) async { await ledgerMonitor.reportFailure(error) }
}

/// `iap-worker reconcile`'s: no worker runs in the process, so nothing pauses; a failure is judged with one probe.
public struct StandaloneReconcileHealth: ReconcileHealth {
    let gamebase: any GamebaseAPI

    public init(gamebase: any GamebaseAPI) {
        self.gamebase = gamebase
    }

    public var allowsGamebaseCalls: Bool { true }
    public var ledgerAvailable: Bool { true }
    public var processingFor: Duration? { .seconds(Int64.max) }
    public func verdictAfterFailure() async -> GamebaseProbeVerdict {
        await gamebase.probe(transactionID: GamebaseTransactionID())
    }
    public func configurationRejected(_ error: GamebaseError) {}
    public func ledgerFailed(_ error: any Error) async {}
}

import Foundation
import Fulfilment
import Synchronization

/// Pauses fetching from every assigned partition while any dependency holds intake (Gamebase down or refusing
/// the configuration, the ledger not answering), and resumes it when none does. Purchases already admitted wait
/// for the dependency themselves; pausing only stops more from piling up.
///
/// Every pause and resume is decided under one lock, together with the holds: a change of holds and a new assignment
/// (``applyHold(to:)``) are applied in one order, so a hold that ends while partitions are being assigned never leaves
/// them paused. The source ignores a pause of a partition it no longer owns (one revoked while the assignment was read).
public final class IntakeSwitch: Sendable {
    public enum Reason: Hashable, Sendable {
        case gamebase
        case ledger
    }

    private let source: any PurchaseSource
    private let clock: any WorkerClock
    private struct State {
        var holds: Set<Reason> = []
        /// When intake last started flowing (the switch's creation, or the end of the last hold), on the monotonic
        /// clock; `nil` while held.
        var flowingSince: ContinuousClock.Instant?
    }
    private let state: Mutex<State>

    public init(source: any PurchaseSource, clock: any WorkerClock = .system) {
        self.source = source
        self.clock = clock
        state = Mutex(State(flowingSince: clock.instant))
    }

    public var isHeld: Bool { state.withLock { !$0.holds.isEmpty } }

    /// How long intake has flowed without a hold, measured on the monotonic clock; `nil` while it is held. The
    /// reconciler waits a grace period after a hold, so it does not race messages that the hold kept waiting.
    public var flowingFor: Duration? {
        let since = state.withLock { $0.flowingSince }
        return since.map { clock.instant - $0 }
    }

    public func set(_ reason: Reason, holding: Bool) {
        // Applied under the lock, so two changes at once cannot land in the wrong order (pause and resume only
        // record a wish for the source's thread; they never call back here).
        state.withLock { state in
            if holding { state.holds.insert(reason) } else { state.holds.remove(reason) }
            if !state.holds.isEmpty {
                state.flowingSince = nil
            } else if state.flowingSince == nil {
                state.flowingSince = clock.instant
            }
            let partitions = source.assignment
            if state.holds.isEmpty { source.resume(partitions) } else { source.pause(partitions) }
        }
    }

    /// Newly assigned partitions wait too while a dependency holds intake.
    func applyHold(to partitions: [SourcePartition]) {
        state.withLock { state in
            if !state.holds.isEmpty { source.pause(partitions) }
        }
    }
}

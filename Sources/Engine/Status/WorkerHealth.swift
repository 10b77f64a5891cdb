import Foundation
import Synchronization

/// What `/healthz` and `/readyz` report.
public final class WorkerHealth: Sendable {
    struct State {
        var subscribed = false
        var lastPoll: ContinuousClock.Instant?
        /// Why the ledger cannot be used now (`unreachable`, `disk full (/path)`…), `nil` while it can.
        var ledgerProblem: String?
        var circuitOpen = false
        var stoppedReason: String?
        var shuttingDown = false
        var pollAge: (@Sendable () -> Duration?)?
        var kafkaProblem: (@Sendable () -> String?)?
        /// Background services that stopped while the worker goes on (the store-notifications intake), and why.
        var stoppedServices: [String: String] = [:]
    }
    private let state = Mutex(State())
    /// A poll loop silent for longer than this is not alive.
    public let pollStallLimit: Duration

    public init(pollStallLimit: Duration = .seconds(30)) {
        self.pollStallLimit = pollStallLimit
    }

    func update(_ body: (inout State) -> Void) { state.withLock { body(&$0) } }

    /// The member has joined its consumer group (its first assignment arrived, possibly empty).
    public func markSubscribed() { update { $0.subscribed = true } }
    public func markPolled(at instant: ContinuousClock.Instant = .now) { update { $0.lastPoll = instant } }
    /// Where liveness reads the age of the consumer's last poll.
    public func setPollAgeSource(_ source: @escaping @Sendable () -> Duration?) { update { $0.pollAge = source } }
    /// Where readiness reads why the consumer cannot speak to its broker (a client library too old for it, failed
    /// authentication, …), while it is not in its group.
    public func setKafkaProblemSource(_ source: @escaping @Sendable () -> String?) {
        update { $0.kafkaProblem = source }
    }
    /// Why the ledger cannot be used (readiness says `ledger: <problem>`), `nil` once it can again.
    public func setLedgerProblem(_ problem: String?) { update { $0.ledgerProblem = problem } }
    public func setCircuitOpen(_ open: Bool) { update { $0.circuitOpen = open } }
    public func setStopped(_ reason: String?) { update { $0.stoppedReason = reason } }
    public func setShuttingDown() { update { $0.shuttingDown = true } }
    /// A background service stopped (`reason`) while purchases go on, or runs again (`nil`): said in readiness's
    /// detail without failing it — the purchases this instance serves are not held up by it.
    public func setServiceStopped(_ service: String, reason: String?) {
        update { $0.stoppedServices[service] = reason }
    }

    /// The background services stopped, by name, and why.
    public var stoppedServices: [String: String] { state.withLock { $0.stoppedServices } }

    /// Time since the consumer's last poll, `nil` before the first.
    public var pollAge: Duration? {
        let (source, lastPoll) = state.withLock { ($0.pollAge, $0.lastPoll) }
        return source?() ?? lastPoll.map { ContinuousClock.now - $0 }
    }

    /// The circuit, the ledger and a configuration stop, each on its own (readiness folds them into one answer).
    public var facts: (circuitOpen: Bool, ledgerReachable: Bool, stoppedReason: String?) {
        state.withLock { ($0.circuitOpen, $0.ledgerProblem == nil, $0.stoppedReason) }
    }

    /// Liveness: the poll loop is alive.
    public var live: (ok: Bool, detail: String) {
        guard let age = pollAge else { return (true, "starting") }
        return age < pollStallLimit ? (true, "ok") : (false, "poll loop silent for \(age)")
    }

    /// Readiness: in the group, ledger reachable, circuit closed, not stopped by a configuration failure. A background
    /// service that stopped is said after the answer, which it does not change.
    public var ready: (ok: Bool, detail: String) {
        let (ok, detail) = purchaseReadiness
        let stopped = stoppedServices.sorted { $0.key < $1.key }.map { "\($0.key) stopped: \($0.value)" }
        return (ok, ([detail] + stopped).joined(separator: "; "))
    }

    private var purchaseReadiness: (ok: Bool, detail: String) {
        let kafkaProblem = state.withLock { $0.kafkaProblem }
        let problem = kafkaProblem?()
        return state.withLock { state in
            if let reason = state.stoppedReason { return (false, "stopped: \(reason)") }
            if state.shuttingDown { return (false, "shutting down") }
            if !state.subscribed {
                return (
                    false, problem.map { "not in the consumer group yet: \($0)" } ?? "not in the consumer group yet"
                )
            }
            if let problem = state.ledgerProblem { return (false, "ledger: \(problem)") }
            if state.circuitOpen { return (false, "Gamebase circuit open") }
            return (true, "ok")
        }
    }
}

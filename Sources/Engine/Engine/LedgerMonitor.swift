import Foundation
import Fulfilment
import Logging
import Synchronization

/// Treats the ledger as a dependency like Gamebase: when it cannot be used, intake pauses (not ready, nothing
/// dead-lettered), purchases wait, and ``run()`` probes with a write every `probeInterval` until one succeeds; then
/// everything resumes by itself.
///
/// Two kinds of outage, told apart by the error's kind, never by counting a purchase's failures:
/// - **unreachable**: a call failed and the probe's write failed or timed out too (a server stopped, a network gone);
/// - **unwritable**: the ledger answers but cannot write (``LedgerError/Code/unwritable``: a full or read-only disk,
///   an I/O error, a read-only server, a SQLite file system below `ledger.min_free_bytes`). One such error is enough:
///   it is the storage's, not the purchase's.
public final class LedgerMonitor: Sendable {
    private let probeInterval: Duration
    private let metrics: any EngineMetrics
    private let health: WorkerHealth
    private let clock: any WorkerClock
    private let logger: Logger
    private let probe: any LedgerProbe
    /// Called after every transition, outside the locks, with whether intake must be held (paused) now.
    private let onTransition: @Sendable (_ holdIntake: Bool) -> Void
    /// The error that decided the current outage, `nil` while the ledger can be used.
    private let outage = Mutex<LedgerError?>(nil)
    /// When the current outage began, how long it lasts at least, and whether any of its reasons was the storage's.
    /// An outage that comes back within ``relapseWindow`` of its end lasts twice as long as the last (up to
    /// ``maxHold``): a storage the probe's small write gets through while the flow's writes still fail (a data
    /// disk full but for the probe's page, one bad sector) then costs a transition a minute at most, not one a
    /// second.
    private struct Course {
        var began: ContinuousClock.Instant?
        var hold: Duration
        var ended: ContinuousClock.Instant?
        var storage = false
    }
    private let course: Mutex<Course>
    static let relapseWindow: Duration = .seconds(30)
    static let maxHold: Duration = .seconds(60)
    private let changed = ChangeSignal()
    /// One probe for every purchase whose ledger call failed meanwhile: a failed batch fails hundreds of purchases
    /// at once, and hundreds of probes would queue for the ledger's connections and time out by themselves.
    private let probes: Coalescer<Void, LedgerError?>

    /// - Parameter probe: its ``LedgerProbe/probeWrite()`` decides whether the ledger can be used; its
    ///   ``LedgerProbe/storageShortfall()`` is read every second while it can.
    public init(
        probe: any LedgerProbe, probeInterval: Duration = .seconds(1), probeDeadline: Duration = .seconds(3),
        metrics: any EngineMetrics, health: WorkerHealth, clock: any WorkerClock = .system, logger: Logger,
        onTransition: @escaping @Sendable (_ holdIntake: Bool) -> Void
    ) {
        self.probeInterval = probeInterval
        self.clock = clock
        self.probe = probe
        self.course = Mutex(Course(hold: .zero))
        let deadline = LedgerDeadline(probeDeadline)
        probes = Coalescer(maxBatch: .max) { calls in
            let failure: LedgerError?
            do {
                try await deadline.run("ledger probe") { try await probe.probeWrite() }
                failure = nil
            } catch let error as LedgerError {
                failure = error
            } catch {
                failure = LedgerError(code: .unavailable, message: "ledger probe: \(error)")
            }
            return Array(repeating: failure, count: calls.count)
        }
        self.metrics = metrics
        self.health = health
        self.logger = logger
        self.onTransition = onTransition
    }

    public var isAvailable: Bool { outage.withLock { $0 == nil } }

    /// After a ledger call of a purchase failed: is the ledger down (so the purchase must wait, not count a
    /// failure)? An `unwritable` error says so by itself; another ledger error is checked with a probe's write,
    /// unless the ledger is known to be down already.
    public func isOutage(after error: any Error) async -> Bool {
        if !isAvailable { return true }
        guard let error = error as? LedgerError else { return false }
        if error.code == .unwritable {
            markUnavailable(because: error)
            return true
        }
        guard let failure = await probeFailure() else { return false }
        markUnavailable(because: failure.code == .unwritable ? failure : error)
        return true
    }

    /// Reports a failure seen outside a purchase (the sweeper): the same check as ``isOutage(after:)``.
    public func reportFailure(_ error: any Error) async {
        _ = await isOutage(after: error)
    }

    /// Pauses intake now if the ledger's disk is below its free-space floor: called before intake starts, so that
    /// a worker started on a nearly full disk takes nothing in.
    public func checkStorage() {
        guard isAvailable, let shortfall = probe.storageShortfall() else { return }
        markUnavailable(because: shortfall)
    }

    /// Waits until the ledger answers; throws `CancellationError` when the task is cancelled or `stillWanted`
    /// turns false.
    public func waitUntilAvailable(stillWanted: @Sendable () -> Bool) async throws {
        while true {
            try Task.checkCancellation()
            guard stillWanted() else { throw CancellationError() }
            if isAvailable { return }
            await changed.wait(timeout: .milliseconds(500))
        }
    }

    /// Watches the free-space floor every second while the ledger can be used; probes with a write every
    /// `probeInterval` while it cannot. Ends when the task is cancelled.
    public func run() async {
        while !Task.isCancelled {
            if isAvailable {
                checkStorage()
                if isAvailable { await changed.wait(timeout: .seconds(1)) }
                continue
            }
            guard let failure = await probeFailure() else {
                if heldLongEnough() {
                    markAvailable()
                    continue
                }
                do { try await clock.sleep(for: probeInterval) } catch { return }
                continue
            }
            noteStillUnavailable(because: failure)
            do { try await clock.sleep(for: probeInterval) } catch { return }
        }
    }

    /// Why the ledger cannot be used now: the probe's write failing, else its disk below the floor; `nil` when it
    /// writes and has room. The floor is asked too, so that a write that still fits never ends an outage the floor
    /// holds; after the write, which may set right what the floor check sees (a ledger file opened again).
    private func probeFailure() async -> LedgerError? {
        let failure: LedgerError?
        do {
            failure = try await probes.submit(())
        } catch {
            failure = LedgerError(code: .unavailable, message: "ledger probe: \(error)")
        }
        return failure ?? probe.storageShortfall()
    }

    /// Whether the current outage has lasted its hold.
    private func heldLongEnough() -> Bool {
        let now = clock.instant
        return course.withLock { course in course.began.map { now - $0 >= course.hold } ?? true }
    }

    private static func problem(of error: LedgerError) -> String {
        error.code == .unwritable ? error.message : "unreachable"
    }

    private func markUnavailable(because error: LedgerError) {
        let changedNow = outage.withLock { value -> Bool in
            defer { if value == nil { value = error } }
            return value == nil
        }
        guard changedNow else { return }
        let now = clock.instant
        let hold = course.withLock { course -> Duration in
            let relapse = course.ended.map { now - $0 < Self.relapseWindow } ?? false
            course.hold = relapse ? min(Self.maxHold, max(probeInterval, course.hold * 2)) : .zero
            course.began = now
            course.storage = error.code == .unwritable
            return course.hold
        }
        if hold > .zero {
            logger.warning(
                "the ledger failed again soon after it came back: this outage lasts \(hold) at least",
                metadata: ["ledger.problem": "\(Self.problem(of: error))"])
        }
        if error.code == .unwritable {
            logger.error(
                "the ledger cannot write: intake paused, purchases wait (nothing is dead-lettered); probing with a write every \(probeInterval)",
                metadata: ["ledger.problem": "\(error.message)"])
        } else {
            logger.error(
                "the ledger does not answer: intake paused, purchases wait (nothing is dead-lettered); probing every \(probeInterval)",
                metadata: ["ledger.error": "\(error)"])
        }
        publish(error)
        onTransition(true)
        changed.signal()
    }

    /// A failed probe during an outage: readiness and the metrics follow the latest reason (a server that answers
    /// again but read-only, a disk that went from full to below the floor); a change of kind is logged once.
    private func noteStillUnavailable(because error: LedgerError) {
        let previous = outage.withLock { value -> LedgerError? in
            defer { if value != nil { value = error } }
            return value
        }
        guard let previous else { return }
        if Self.problem(of: previous) != Self.problem(of: error) {
            if (previous.code == .unwritable) != (error.code == .unwritable) {
                logger.warning(
                    "the ledger is still not usable, now for another reason",
                    metadata: ["ledger.problem": "\(Self.problem(of: error))", "ledger.error": "\(error)"])
            }
            publish(error)
        }
    }

    /// The metrics and readiness for the current state. `iap_ledger_writable` stays 0 for the whole of an outage
    /// any of whose reasons was the storage's: a failing disk that alternates between refused writes and probes that
    /// time out must not reset the alert's `for:` at each turn.
    private func publish(_ error: LedgerError?) {
        let storage = course.withLock { course -> Bool in
            if error?.code == .unwritable { course.storage = true }
            return error != nil && course.storage
        }
        metrics.setLedgerUnavailable(error != nil)
        metrics.setLedgerWritable(!storage)
        health.setLedgerProblem(error.map(Self.problem(of:)))
    }

    private func markAvailable() {
        let ended = outage.withLock { value -> LedgerError? in
            defer { value = nil }
            return value
        }
        guard let ended else { return }
        let now = clock.instant
        course.withLock { course in
            course.ended = now
            course.began = nil
        }
        if ended.code == .unwritable {
            logger.notice("the ledger writes again: intake resumed", metadata: ["ledger.problem": "\(ended.message)"])
        } else {
            logger.notice("the ledger answers again: intake resumed")
        }
        course.withLock { $0.storage = false }
        publish(nil)
        onTransition(false)
        changed.signal()
    }
}

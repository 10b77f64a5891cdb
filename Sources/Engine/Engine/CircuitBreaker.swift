import DequeModule
import Gamebase

/// Decides whether purchases may call Gamebase: closed (yes), open (Gamebase is down as a whole) or stopped
/// (Gamebase refuses the worker's configuration). Telling "Gamebase is down" from "this purchase fails" is left to
/// a health probe that depends on no message: the breaker opens on a high failure ratio or a failed probe, and
/// only an answered probe closes it.
///
/// A value-type state machine: the engine feeds it verdicts and applies the transitions it returns.
public struct CircuitBreaker: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// The circuit opens when at least this share of recent purchases failed at Gamebase…
        public var failureRatio: Double
        /// …out of at least this many.
        public var minimumSamples: Int
        /// Verdicts older than this are forgotten.
        public var window: Duration
        /// How often a probe runs while the circuit is open or stopped.
        public var probeInterval: Duration

        public init(
            failureRatio: Double = 0.5, minimumSamples: Int = 10, window: Duration = .seconds(30),
            probeInterval: Duration = .seconds(1)
        ) {
            self.failureRatio = failureRatio
            self.minimumSamples = minimumSamples
            self.window = window
            self.probeInterval = probeInterval
        }
    }

    public enum State: Sendable, Equatable {
        case closed
        /// Gamebase does not answer; purchases wait.
        case open
        /// Gamebase refuses the configuration; purchases wait, nothing is committed for them.
        case stopped(GamebaseError)
    }

    public enum Transition: Sendable, Equatable {
        case opened
        case closed
        case stopped(GamebaseError)
        /// From stopped back to closed: the configuration is accepted again.
        case resumed
    }

    public let configuration: Configuration
    public private(set) var state: State = .closed
    /// Oldest first. A deque: every purchase drops the oldest verdict once the window holds 1,000, and an array
    /// shifted all 1,000 for it.
    private var verdicts: Deque<(at: ContinuousClock.Instant, failed: Bool)> = []

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Whether purchases may call Gamebase now.
    public var allowsCalls: Bool { state == .closed }

    public var isStopped: Bool {
        if case .stopped = state { return true }
        return false
    }

    /// Records one purchase's verdict on Gamebase, once per purchase: it got answers (`failed: false`), or it kept
    /// failing transiently through all its attempts (`failed: true`). Opens the circuit when most recent
    /// purchases failed.
    public mutating func record(failed: Bool, now: ContinuousClock.Instant) -> Transition? {
        forget(before: now - configuration.window)
        verdicts.append((now, failed))
        guard state == .closed, failed, verdicts.count >= configuration.minimumSamples,
            failureShare >= configuration.failureRatio
        else { return nil }
        state = .open
        return .opened
    }

    /// A probe got no usable answer: Gamebase is down.
    public mutating func probeFailed() -> Transition? {
        guard state == .closed else { return nil }
        state = .open
        return .opened
    }

    /// Gamebase refused the worker's configuration (a purchase's call or a probe).
    public mutating func configurationRejected(_ error: GamebaseError) -> Transition? {
        if case .stopped = state { return nil }
        state = .stopped(error)
        return .stopped(error)
    }

    /// A probe got an answer: Gamebase works and accepts the configuration. The verdicts of the outage are
    /// forgotten, so the purchases it held do not reopen the circuit at once.
    public mutating func probeAnswered() -> Transition? {
        switch state {
        case .closed:
            return nil
        case .open:
            state = .closed
            verdicts.removeAll()
            return .closed
        case .stopped:
            state = .closed
            verdicts.removeAll()
            return .resumed
        }
    }

    private var failureShare: Double {
        verdicts.isEmpty ? 0 : Double(verdicts.count { $0.failed }) / Double(verdicts.count)
    }

    private mutating func forget(before cutoff: ContinuousClock.Instant) {
        while let oldest = verdicts.first, oldest.at < cutoff { verdicts.removeFirst() }
        // Bound memory under heavy traffic: the ratio of the last 1,000 purchases is enough.
        if verdicts.count > 1_000 { verdicts.removeFirst(verdicts.count - 1_000) }
    }
}

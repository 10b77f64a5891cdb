/// Decides when Gamebase is failing as a whole (not one purchase), so the worker pauses instead of
/// dead-lettering everything.
///
/// A value-type state machine: the engine feeds it outcomes and applies the transitions it returns.
public struct CircuitBreaker: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// The circuit opens when at least this share of recent calls failed…
        public var failureRatio: Double
        /// …out of at least this many.
        public var minimumSamples: Int
        /// Outcomes older than this are forgotten.
        public var window: Duration
        /// How long it stays open before one probe may go through; doubles after a failed probe.
        public var openDuration: Duration
        public var maxOpenDuration: Duration
        /// A probe that reports nothing for this long (its task ended some other way) lets another probe go.
        public var probeTimeout: Duration

        public init(
            failureRatio: Double = 0.5, minimumSamples: Int = 10, window: Duration = .seconds(30),
            openDuration: Duration = .seconds(2), maxOpenDuration: Duration = .seconds(30), probeTimeout: Duration = .seconds(30)
        ) {
            self.failureRatio = failureRatio
            self.minimumSamples = minimumSamples
            self.window = window
            self.openDuration = openDuration
            self.maxOpenDuration = maxOpenDuration
            self.probeTimeout = probeTimeout
        }
    }

    public enum State: Sendable, Hashable {
        case closed
        case open(until: ContinuousClock.Instant, nextOpenDuration: Duration)
        /// One probe is under way, until `probeDeadline` at the latest.
        case halfOpen(probeDeadline: ContinuousClock.Instant, nextOpenDuration: Duration)
    }

    public enum Transition: Sendable, Hashable {
        case opened
        case closed
    }

    public let configuration: Configuration
    public private(set) var state: State = .closed
    private var outcomes: [(at: ContinuousClock.Instant, failed: Bool)] = []

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    public var isOpen: Bool { state != .closed }

    /// Records a call that reached Gamebase (`failed: false`) or failed transiently (`failed: true`).
    public mutating func record(failed: Bool, now: ContinuousClock.Instant) -> Transition? {
        forget(before: now - configuration.window)
        outcomes.append((now, failed))
        switch state {
        case .closed:
            guard failed, outcomes.count >= configuration.minimumSamples, failureShare >= configuration.failureRatio else {
                return nil
            }
            state = .open(until: now + configuration.openDuration, nextOpenDuration: doubled(configuration.openDuration))
            return .opened
        case .halfOpen(_, let next):
            if failed {
                state = .open(until: now + next, nextOpenDuration: doubled(next))
                return nil
            }
            state = .closed
            outcomes.removeAll()
            return .closed
        case .open:
            // A call that started before the circuit opened.
            return nil
        }
    }

    /// Whether a held purchase may try Gamebase now. When the open period is over, the first caller becomes
    /// the probe; so does the next caller once a probe has been silent for `probeTimeout`.
    public mutating func allowAttempt(now: ContinuousClock.Instant) -> Bool {
        switch state {
        case .closed:
            return true
        case .open(let until, let next):
            guard now >= until else { return false }
            state = .halfOpen(probeDeadline: now + configuration.probeTimeout, nextOpenDuration: next)
            return true
        case .halfOpen(let deadline, let next):
            guard now >= deadline else { return false }
            state = .halfOpen(probeDeadline: now + configuration.probeTimeout, nextOpenDuration: next)
            return true
        }
    }

    /// Whether a probe is under way: the caller that was just allowed through is it.
    public var isProbing: Bool {
        if case .halfOpen = state { return true }
        return false
    }

    /// The probe ended without a verdict on Gamebase: its purchase needed no call (a duplicate, a malformed
    /// message), its partition moved, or the ledger failed. The next held purchase probes at once; without
    /// this the circuit would stay half-open and the partitions paused.
    public mutating func probeEndedWithoutVerdict(now: ContinuousClock.Instant) {
        guard case .halfOpen(_, let next) = state else { return }
        state = .open(until: now, nextOpenDuration: next)
    }

    /// Whether a purchase that kept failing should be dead-lettered: only when Gamebase is otherwise healthy
    /// (enough recent calls, mostly successful). Otherwise it is held and retried, so an outage never floods
    /// the dead-letter topic.
    public func shouldDeadLetter(now: ContinuousClock.Instant) -> Bool {
        guard state == .closed else { return false }
        let recent = outcomes.filter { $0.at >= now - configuration.window }
        guard recent.count >= configuration.minimumSamples else { return false }
        let failures = recent.filter(\.failed).count
        return Double(failures) / Double(recent.count) < configuration.failureRatio
    }

    private var failureShare: Double {
        outcomes.isEmpty ? 0 : Double(outcomes.filter(\.failed).count) / Double(outcomes.count)
    }

    private mutating func forget(before cutoff: ContinuousClock.Instant) {
        if let index = outcomes.firstIndex(where: { $0.at >= cutoff }) {
            if index > 0 { outcomes.removeFirst(index) }
        } else {
            outcomes.removeAll()
        }
        // Bound memory under heavy traffic: the ratio of the last 1,000 calls is enough.
        if outcomes.count > 1_000 { outcomes.removeFirst(outcomes.count - 1_000) }
    }

    private func doubled(_ duration: Duration) -> Duration {
        min(duration * 2, configuration.maxOpenDuration)
    }
}

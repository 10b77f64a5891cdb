import Logging
import Synchronization

/// Logs each ``KafkaBrokerProblem`` as one error line, at most once a minute per problem and broker, however many
/// clients of the process meet it and however often librdkafka reconnects; remembers the latest for `/readyz` and
/// `check-config`.
package final class BrokerProblemReporter: Sendable {
    /// The reporter every client of the process shares (the consumer and the producers meet the same broker).
    package static let shared = BrokerProblemReporter()

    /// The shortest time between two lines of one problem.
    package let interval: Duration
    private let now: @Sendable () -> ContinuousClock.Instant
    private struct State {
        var lastLogged: [String: ContinuousClock.Instant] = [:]
        var latest: (problem: KafkaBrokerProblem, at: ContinuousClock.Instant)?
    }
    private let state = Mutex(State())

    package init(
        interval: Duration = .seconds(60), now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        self.interval = interval
        self.now = now
    }

    /// Records `problem` and logs it unless the same problem was logged less than ``interval`` ago; returns whether
    /// it logged.
    @discardableResult
    package func report(_ problem: KafkaBrokerProblem, logger: Logger) -> Bool {
        let instant = now()
        let key = "\(problem.kind.rawValue) \(problem.broker)"
        let log = state.withLock { state -> Bool in
            state.latest = (problem, instant)
            if let last = state.lastLogged[key], instant - last < interval { return false }
            // Entries older than the interval decide nothing: dropped, so broker names cannot pile up.
            state.lastLogged = state.lastLogged.filter { instant - $0.value < interval }
            state.lastLogged[key] = instant
            return true
        }
        if log {
            logger.error(
                "\(problem.description)",
                metadata: [
                    "kafka.broker": "\(problem.broker)", "kafka.problem": "\(problem.kind.rawValue)",
                    "librdkafka.version": "\(problem.librdkafkaVersion)",
                ])
        }
        return log
    }

    /// The latest problem, if one was met within `window` (a problem not seen again for that long is taken as
    /// gone: librdkafka reports it again on every reconnect while it lasts).
    package func current(within window: Duration = .seconds(120)) -> KafkaBrokerProblem? {
        let instant = now()
        return state.withLock { state in
            guard let latest = state.latest, instant - latest.at < window else { return nil }
            return latest.problem
        }
    }
}

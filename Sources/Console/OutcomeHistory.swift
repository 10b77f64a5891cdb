import Foundation
import Synchronization

/// Outcomes over the last minutes, made from the worker's cumulative counts: the console samples them every
/// ``interval`` and a window is the difference between now and the oldest sample inside it. Costs the purchase path
/// nothing (it reads counts the metrics keep anyway) and holds at most an hour of samples.
public final class OutcomeHistory: Sendable {
    /// Counts of one moment.
    public struct Counts: Sendable, Hashable {
        public var outcomes: [String: Int]
        public var rejections: [String: Int]
        public var deadLetters: [String: Int]

        public init(outcomes: [String: Int], rejections: [String: Int], deadLetters: [String: Int]) {
            self.outcomes = outcomes
            self.rejections = rejections
            self.deadLetters = deadLetters
        }

        static let zero = Counts(outcomes: [:], rejections: [:], deadLetters: [:])

        func minus(_ earlier: Counts) -> Counts {
            func difference(_ now: [String: Int], _ then: [String: Int]) -> [String: Int] {
                // A counter never goes down; a key absent then counted from zero.
                now.reduce(into: [:]) { out, entry in
                    let delta = entry.value - (then[entry.key] ?? 0)
                    if delta > 0 { out[entry.key] = delta }
                }
            }
            return Counts(
                outcomes: difference(outcomes, earlier.outcomes),
                rejections: difference(rejections, earlier.rejections),
                deadLetters: difference(deadLetters, earlier.deadLetters))
        }
    }

    /// What happened within a window.
    public struct Window: Sendable, Hashable, Codable {
        public var minutes: Int
        /// How much of the window the samples cover (less than it while the process is younger).
        public var coveredSeconds: Int
        public var outcomes: [String: Int]
        public var rejections: [String: Int]
        public var deadLetters: [String: Int]
        /// Purchase messages a second over the covered time.
        public var perSecond: Double
    }

    private struct Sample {
        var at: ContinuousClock.Instant
        var counts: Counts
    }

    public let interval: Duration
    private let capacity: Int
    private let samples: Mutex<[Sample]>

    /// - Parameter keep: the longest window asked for.
    public init(interval: Duration = .seconds(10), keep: Duration = .seconds(3_600), start: Counts? = nil) {
        self.interval = interval
        capacity = Int(keep / interval) + 2
        samples = Mutex(start.map { [Sample(at: .now, counts: $0)] } ?? [])
    }

    /// Records the counts of now.
    public func record(_ counts: Counts, at instant: ContinuousClock.Instant = .now) {
        samples.withLock { samples in
            samples.append(Sample(at: instant, counts: counts))
            if samples.count > capacity { samples.removeFirst(samples.count - capacity) }
        }
    }

    /// The window of `minutes` ending with `current`.
    public func window(minutes: Int, current: Counts, at instant: ContinuousClock.Instant = .now) -> Window {
        let start = instant - .seconds(minutes * 60)
        let base = samples.withLock { samples in samples.first { $0.at >= start } ?? samples.last }
        let delta = base.map { current.minus($0.counts) } ?? current.minus(.zero)
        let covered = base.map { max(0, Int(((instant - $0.at) / .seconds(1)).rounded())) } ?? 0
        let total = delta.outcomes.values.reduce(0, +)
        return Window(
            minutes: minutes, coveredSeconds: covered, outcomes: delta.outcomes, rejections: delta.rejections,
            deadLetters: delta.deadLetters, perSecond: covered > 0 ? Double(total) / Double(covered) : 0)
    }
}

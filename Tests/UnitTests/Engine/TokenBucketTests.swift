import Testing

@testable import Engine

@Suite struct TokenBucketTests {
    static let start = ContinuousClock.now

    static func at(_ seconds: Double) -> ContinuousClock.Instant { start + .nanoseconds(Int64(seconds * 1e9)) }

    @Test func callsAtOnceAreSpacedByTheRate() {
        var bucket = TokenBucket(rate: 20, capacity: 1, now: Self.at(0))
        let waits = (0..<5).map { _ in bucket.reserve(now: Self.at(0)) }
        #expect(waits == [.zero, .milliseconds(50), .milliseconds(100), .milliseconds(150), .milliseconds(200)])
    }

    @Test func aQuietBucketRefillsOnlyToItsCapacity() {
        var bucket = TokenBucket(rate: 10, capacity: 3, now: Self.at(0))
        for _ in 0..<3 { #expect(bucket.reserve(now: Self.at(0)) == .zero) }
        #expect(bucket.reserve(now: Self.at(0)) == .milliseconds(100))
        // An hour of silence buys three calls, not 36,000.
        for _ in 0..<3 { #expect(bucket.reserve(now: Self.at(3_600)) == .zero) }
        #expect(bucket.reserve(now: Self.at(3_600)) == .milliseconds(100))
    }

    @Test(arguments: [1, 7, 20, 250])
    func noWindowOfOneSecondHoldsMoreThanTheRatePlusTheBurst(rate: Int) {
        // Callers that always come back as soon as they may: when is each call made?
        var bucket = TokenBucket(rate: Double(rate), capacity: 1, now: Self.at(0))
        var calls: [Double] = []
        var now = 0.0
        while calls.count < rate * 5 {
            let wait = bucket.reserve(now: Self.at(now))
            now += Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18
            calls.append(now)
        }
        for (index, call) in calls.enumerated() {
            let inWindow = calls[index...].prefix { $0 < call + 1 - 1e-9 }.count
            #expect(inWindow <= rate + 1, "\(inWindow) calls within one second from \(call)")
        }
        #expect(abs(calls.last! - Double(rate * 5 - 1) / Double(rate)) < 0.01, "and the rate is reached")
    }
}

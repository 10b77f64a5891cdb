/// What `iap-dev bench soak` concludes from the worker's resident memory sampled once a minute: a daemon that runs for
/// months must hold a steady load in steady memory, so the last minute's RSS may exceed the fifth's by at most
/// `allowedGrowth` (10 % by default: issue #39). Minute 5, not minute 1: by then the buffers, caches and connection
/// pool a steady load fills are full, and what grows after that is what the worker keeps and should not.
public struct SoakVerdict: Codable, Sendable, Equatable {
    /// The minute compared with the last (1-based: the sample taken 5 minutes after the first message).
    public static let settledMinute = 5

    public var settledMiB: Double
    public var lastMiB: Double
    /// The minute of `lastMiB`.
    public var lastMinute: Int
    /// `lastMiB / settledMiB - 1`.
    public var growth: Double
    public var allowedGrowth: Double
    /// Whether `growth` is within `allowedGrowth` (exactly the allowance, 100 → 110 MiB at 10 %, passes).
    public var isFlat: Bool

    /// Nil when fewer samples than `settledMinute + 1` were taken: the run was too short to say.
    public init?(minuteSamplesMiB samples: [Double], allowedGrowth: Double = 0.10) {
        guard samples.count > Self.settledMinute, samples.allSatisfy({ $0.isFinite && $0 > 0 }) else { return nil }
        settledMiB = samples[Self.settledMinute - 1]
        lastMiB = samples[samples.count - 1]
        lastMinute = samples.count
        growth = lastMiB / settledMiB - 1
        self.allowedGrowth = allowedGrowth
        // A millionth of tolerance: 110 / 100 - 1 is 0.10000000000000009 in binary floating point.
        isFlat = growth <= allowedGrowth + 1e-6
    }

    public var summary: String {
        // The allowance as given: "10", "2.5".
        let tenths = (allowedGrowth * 1000).rounded()
        let allowance = tenths.truncatingRemainder(dividingBy: 10) == 0 ? "\(Int(tenths / 10))" : "\(tenths / 10)"
        return "RSS at minute \(Self.settledMinute): \(Self.mib(settledMiB)), at minute \(lastMinute): "
            + "\(Self.mib(lastMiB)) (\(Self.percent(growth)) %): "
            + (isFlat ? "flat (within \(allowance) %)" : "GREW more than \(allowance) %")
    }

    static func mib(_ value: Double) -> String { "\((value * 10).rounded() / 10) MiB" }

    /// A fraction as a signed percentage with one decimal ("+9.4", "-0.2"); no change is "+0.0", never "-0.0".
    static func percent(_ fraction: Double) -> String {
        let tenths = (fraction * 1000).rounded()
        return (tenths < 0 ? "-" : "+") + "\(abs(tenths) / 10)"
    }
}

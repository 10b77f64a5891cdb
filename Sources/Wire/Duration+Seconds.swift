extension Duration {
    /// The duration in seconds, as a `Double` (for metrics, reports and date arithmetic).
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

extension Duration {
    /// The duration in whole nanoseconds, clamped to `Int64`'s range (a configured duration of any size converts
    /// without trapping).
    package var clampedNanoseconds: Int64 {
        let (whole, overflow) = components.seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return components.seconds < 0 ? .min : .max }
        let (sum, over) = whole.addingReportingOverflow(components.attoseconds / 1_000_000_000)
        return over ? (whole < 0 ? .min : .max) : sum
    }
}

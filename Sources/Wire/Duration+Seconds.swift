extension Duration {
    /// The duration in seconds, as a `Double` (for metrics, reports and date arithmetic).
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// Polls `condition` every `interval` until it holds; throws ``TestSetupError`` naming `what` once `limit` has passed.
/// For work that other tasks or processes finish on their own; a test clock's sleepers are advanced, never waited for.
public func waitUntil(
    _ what: String, within limit: Duration, every interval: Duration, _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + limit
    while try await !condition() {
        guard ContinuousClock.now < deadline else {
            throw TestSetupError(message: "timed out after \(limit) waiting until \(what)")
        }
        try await Task.sleep(for: interval)
    }
}

/// Polls `condition` every 100 ms until it holds or `seconds` pass; returns whether it held (for an `#expect`).
public func eventually(within seconds: Double, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(100))
    }
    return try await condition()
}

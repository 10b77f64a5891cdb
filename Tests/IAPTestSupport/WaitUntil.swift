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

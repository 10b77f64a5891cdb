/// The deadline of every ledger call the worker makes: a database that stops answering makes a call fail with
/// ``LedgerError`` `unavailable` after ``limit``, never hang. The one place deadlines are set: the flow's batches
/// (``FlowLedger``) and the services' calls go through it.
///
/// Only idempotent calls belong here (every ledger write is a guarded insert or update): one that timed out may still
/// complete later, and does no harm then.
public struct LedgerDeadline: Sendable {
    public let limit: Duration
    private let watchdog: DeadlineWatchdog

    public init(_ limit: Duration = .seconds(10)) {
        self.limit = limit
        self.watchdog = DeadlineWatchdog()
    }

    /// Runs `call`, or throws ``LedgerError`` `unavailable` once ``limit`` has passed, whatever `call` does.
    public func run<T: Sendable>(_ what: @autoclosure () -> String, _ call: @escaping @Sendable () async throws -> T)
        async throws -> T
    {
        do {
            return try await watchdog.run(limit, what(), call)
        } catch let exceeded as DeadlineExceeded {
            throw LedgerError(code: .unavailable, message: "the ledger did not answer: \(exceeded)")
        }
    }
}

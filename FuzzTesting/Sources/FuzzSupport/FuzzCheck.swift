import Dispatch

/// Stops the process with `message` when `condition` is false: libFuzzer then saves the input that did it.
///
/// `precondition` is not used because it drops its message in optimised builds.
public func fuzzCheck(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID,
    line: UInt = #line
) {
    if !condition() { fuzzFailure(message(), file: file, line: line) }
}

/// Stops the process with `message`.
public func fuzzFailure(_ message: String, file: StaticString = #fileID, line: UInt = #line) -> Never {
    fatalError("fuzz check failed: \(message)", file: file, line: line)
}

/// Runs an async body to its end from libFuzzer's synchronous callback: a task on the global executor, and the
/// calling thread (libFuzzer's, never one of the pool's) blocked on a semaphore until it ends.
public func runBlocking(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task {
        await body()
        done.signal()
    }
    done.wait()
}

/// What a fake answers to a check's read (the memory ledger never fails: a throw there is a broken fake, not a finding
/// about the flow, but still stops the run).
public func fuzzRead<T>(_ what: String, _ read: () async throws -> T) async -> T {
    do {
        return try await read()
    } catch {
        fuzzFailure("\(what) threw \(error) in a fake that never fails")
    }
}

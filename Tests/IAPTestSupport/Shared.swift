import Synchronization

/// A value shared between a test and the tasks or callbacks it starts, under one lock.
public final class Shared<Value: Sendable>: Sendable {
    private let state: Mutex<Value>
    public init(_ value: Value) { state = Mutex(value) }
    public func withLock<R: Sendable>(_ body: (inout Value) throws -> R) rethrows -> R {
        try state.withLock { try body(&$0) }
    }
    public var value: Value { state.withLock { $0 } }
}

import Foundation
import Fulfilment
import Synchronization

/// A real ledger that counts what it is asked: grant batches, and probes (``countUnconsumed()``), which can be
/// made slow.
public final class CountingLedger: LedgerPassThrough {
    public let base: any LedgerStore
    private let counts = Mutex((grantBatches: 0, probes: 0))
    private let probeDelay: Duration
    public init(_ base: any LedgerStore, probeDelay: Duration = .zero) {
        self.base = base
        self.probeDelay = probeDelay
    }
    public var grantBatches: Int { counts.withLock { $0.grantBatches } }
    public var probes: Int { counts.withLock { $0.probes } }

    public func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult] {
        counts.withLock { $0.grantBatches += 1 }
        return try await base.insertGrants(writes)
    }

    public func countUnconsumed() async throws -> Int {
        counts.withLock { $0.probes += 1 }
        try await Task.sleep(for: probeDelay)
        return try await base.countUnconsumed()
    }
}

import Foundation
import Fulfilment
import IAPTestSupport
import Logging
import Testing

@testable import Engine

@Suite("Ledger monitor", .timeLimit(.minutes(1)))
struct LedgerMonitorTests {
    /// A failed batch fails hundreds of purchases at once; each asks whether the ledger is down. They share one
    /// probe instead of queueing hundreds for the ledger's connections (which would time out by themselves and
    /// declare a working ledger down).
    @Test func purchasesFailingTogetherShareOneProbe() async throws {
        try await TestDatabases.withFreshLedger(.sqlite) { base in
            let ledger = CountingLedger(base, probeDelay: .milliseconds(200))
            let monitor = LedgerMonitor(
                ledger: ledger, metrics: RecordingMetrics(), health: WorkerHealth(), logger: Logger(label: "test"),
                onTransition: { _ in })
            let failure = LedgerError(code: .query, message: "a batch the server refused")
            let outages = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<300 { group.addTask { await monitor.isOutage(after: failure) } }
                return await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
            }
            #expect(outages == 0, "the ledger answers: no purchase waits for an outage")
            #expect(ledger.probes <= 2, "\(ledger.probes) probes for 300 failures")
            #expect(monitor.isAvailable)
        }
    }
}

import Foundation
import Fulfilment
import IAPTestSupport
import Logging
import Synchronization
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
                probe: ledger, metrics: RecordingMetrics(), health: WorkerHealth(), logger: Logger(label: "test"),
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

/// A ledger probe whose write fails as the test says, and whose disk is as short as the test says.
final class ScriptedProbe: LedgerProbe {
    let writeFailure = Mutex<LedgerError?>(nil)
    let shortfall = Mutex<LedgerError?>(nil)
    let writes = Mutex(0)

    func probeWrite() async throws {
        writes.withLock { $0 += 1 }
        if let failure = writeFailure.withLock({ $0 }) { throw failure }
    }

    func storageShortfall() -> LedgerError? { shortfall.withLock { $0 } }
}

@Suite("Ledger monitor: a ledger that answers but cannot write", .timeLimit(.minutes(1)))
struct LedgerMonitorUnwritableTests {
    let probe = ScriptedProbe()
    let metrics = RecordingMetrics()
    let health = WorkerHealth()
    let holds = Shared<[Bool]>([])

    func monitor() -> LedgerMonitor {
        health.markSubscribed()
        return LedgerMonitor(
            probe: probe, probeInterval: .milliseconds(20), metrics: metrics, health: health,
            logger: Logger(label: "test"), onTransition: { [holds] hold in holds.withLock { $0.append(hold) } })
    }

    static let diskFull = LedgerError(
        code: .unwritable, message: "disk full (/data/ledger.sqlite); SQLite: SQLITE_FULL: database or disk is full")

    /// One `unwritable` error decides: no probe, no purchase's retry counted. A read would still answer, so the old
    /// read probe called it the purchase's failure and dead-lettered paid purchases one by one.
    @Test func anUnwritableErrorIsAnOutageByItsKindAlone() async throws {
        let monitor = monitor()
        probe.writeFailure.withLock { $0 = Self.diskFull }
        #expect(await monitor.isOutage(after: Self.diskFull))
        #expect(probe.writes.withLock { $0 } == 0, "the error's kind decides; no probe is needed")
        #expect(!monitor.isAvailable)
        #expect(health.ready.ok == false)
        #expect(
            health.ready.detail
                == "ledger: disk full (/data/ledger.sqlite); SQLite: SQLITE_FULL: database or disk is full")
        #expect(metrics.values.ledgerWritable == false)
        #expect(metrics.values.ledgerUnavailable == true)
        #expect(holds.withLock { $0 } == [true], "intake held once")
        #expect(await monitor.isOutage(after: LedgerError(code: .query, message: "anything")), "down is down")
    }

    @Test func itResumesOnlyOnceAProbeWrites() async throws {
        let monitor = monitor()
        probe.writeFailure.withLock { $0 = Self.diskFull }
        #expect(await monitor.isOutage(after: Self.diskFull))
        let watching = Task { await monitor.run() }
        defer { watching.cancel() }
        #expect(await eventually(within: 5) { probe.writes.withLock { $0 } >= 3 }, "probed every interval")
        #expect(!monitor.isAvailable, "the probe's write still fails")
        probe.writeFailure.withLock { $0 = nil }
        // Readiness, metrics and intake hear of it just after the state flips.
        #expect(await eventually(within: 2) { monitor.isAvailable && holds.withLock { $0 }.count == 2 })
        #expect(health.ready == (true, "ok"))
        #expect(metrics.values.ledgerWritable == true)
        #expect(metrics.values.ledgerUnavailable == false)
        #expect(holds.withLock { $0 } == [true, false])
    }

    /// A statement's own failure (a constraint, a bug) with a ledger that writes is the purchase's: counted, retried.
    @Test func aStatementsOwnFailureWithALedgerThatWritesIsNoOutage() async throws {
        let monitor = monitor()
        #expect(!(await monitor.isOutage(after: LedgerError(code: .query, message: "CHECK constraint failed"))))
        #expect(probe.writes.withLock { $0 } == 1)
        #expect(monitor.isAvailable)
        #expect(metrics.values.ledgerWritable)
    }

    /// Another error, and the probe's write then fails for the storage: the outage is the storage's, and readiness
    /// says so rather than "unreachable".
    @Test func anotherErrorWhoseProbeCannotWriteIsAnUnwritableOutage() async throws {
        let monitor = monitor()
        probe.writeFailure.withLock { $0 = Self.diskFull }
        #expect(await monitor.isOutage(after: LedgerError(code: .query, message: "a batch failed")))
        #expect(health.ready.detail.hasPrefix("ledger: disk full"))
        #expect(metrics.values.ledgerWritable == false)
    }

    /// A server that does not answer at all is unreachable: not ready, but not "unwritable" in the metric.
    @Test func aProbeThatTimesOutIsAnUnreachableLedger() async throws {
        let monitor = monitor()
        probe.writeFailure.withLock { $0 = LedgerError(code: .unavailable, message: "the ledger did not answer") }
        #expect(await monitor.isOutage(after: LedgerError(code: .query, message: "connection reset")))
        #expect(health.ready.detail == "ledger: unreachable")
        #expect(metrics.values.ledgerWritable == true)
        #expect(metrics.values.ledgerUnavailable == true)
    }

    /// The probe's small write gets through while the flow's writes keep failing (a data disk full but for the
    /// probe's page): each outage that comes back right after its end lasts twice as long as the last, so the
    /// transitions slow down instead of repeating every probe.
    @Test func aStorageThatFailsAgainRightAfterEachRecoveryIsHeldLongerEachTime() async throws {
        let monitor = monitor()
        let watching = Task { await monitor.run() }
        defer { watching.cancel() }
        var lasted: [Duration] = []
        for _ in 0..<5 {
            let start = ContinuousClock.now
            #expect(await monitor.isOutage(after: Self.diskFull))
            #expect(await eventually(within: 5) { monitor.isAvailable })
            lasted.append(ContinuousClock.now - start)
        }
        // Holds of 0, 20, 40, 80, 160 ms (the probe interval doubled): the last outages last their hold at least.
        #expect(lasted[3] >= .milliseconds(80), "\(lasted)")
        #expect(lasted[4] >= .milliseconds(160), "\(lasted)")
        #expect(holds.withLock { $0 }.count == 10, "one pause and one resume per outage")
    }

    /// A failing disk alternates between refused writes and probes that time out: the metric stays 0 for the whole
    /// outage, so the alert's `for:` is not reset at each turn.
    @Test func notWritableStaysSoForTheWholeOutageWhateverItsLaterReasons() async throws {
        let monitor = monitor()
        probe.writeFailure.withLock { $0 = LedgerError(code: .unavailable, message: "the ledger did not answer") }
        #expect(await monitor.isOutage(after: Self.diskFull))
        let watching = Task { await monitor.run() }
        defer { watching.cancel() }
        #expect(
            await eventually(within: 5) { health.ready.detail == "ledger: unreachable" },
            "readiness follows the latest reason")
        #expect(metrics.values.ledgerWritable == false, "the storage's outage is still the storage's")
        probe.writeFailure.withLock { $0 = nil }
        #expect(await eventually(within: 2) { monitor.isAvailable })
        #expect(metrics.values.ledgerWritable == true)
    }

    /// `ledger.min_free_bytes`: a disk already below the floor holds intake before the first message; while
    /// running, the floor is read every second; space back above it resumes.
    @Test func aDiskBelowTheFloorHoldsIntakeFromTheStartUntilSpaceReturns() async throws {
        let monitor = monitor()
        let low = LedgerError(
            code: .unwritable,
            message: "disk below ledger.min_free_bytes (/data/ledger.sqlite): 1000 bytes free, 67108864 wanted")
        probe.shortfall.withLock { $0 = low }
        probe.writeFailure.withLock { $0 = low }
        monitor.checkStorage()
        #expect(!monitor.isAvailable)
        #expect(health.ready.detail.hasPrefix("ledger: disk below ledger.min_free_bytes"))
        let watching = Task { await monitor.run() }
        defer { watching.cancel() }
        probe.shortfall.withLock { $0 = nil }
        probe.writeFailure.withLock { $0 = nil }
        #expect(await eventually(within: 2) { monitor.isAvailable })
        probe.shortfall.withLock { $0 = low }
        #expect(await eventually(within: 3) { !monitor.isAvailable }, "the floor is watched while running")
        // The hold is reported to intake just after the state flips (a loaded machine can run the check between).
        #expect(
            await eventually(within: 2) { holds.withLock { $0 } == [true, false, true] }, "\(holds.withLock { $0 })")
    }
}

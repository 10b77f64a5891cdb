import Foundation
import Fulfilment
import IAPTestSupport
import Kafka
import Ledger
import Testing

@testable import SystemTestSupport

/// The built `iap-worker` under Debian's libfaketime (``FakeWallClock``), its wall clock driven from a file the test
/// rewrites while purchases flow: stepped back an hour, then forward two (a VM resumed, an NTP correction). The
/// monotonic clock is left alone, as a real step leaves it.
@Suite("A wall clock that steps under iap-worker", .timeLimit(.minutes(10)))
struct ClockStepProcessTests {
    typealias Cluster = ProcessCluster

    /// Three batches of purchases, one per clock: as it was, an hour back, an hour ahead. Between the second and the
    /// third, the reconciler sights purchases of the second batch's players whose messages come only after the step
    /// forward: their 45-second grace (long enough for a loaded machine to deliver the messages, seconds after the
    /// sightings) must be 45 seconds, not cut by the step's two hours, so the messages grant them.
    /// Published outbox rows are kept an hour: none is minutes old by the ledger's times, so none may be pruned.
    /// Skipped where libfaketime or a C compiler is missing, except under CI (which installs them): there it fails.
    @Test(
        .enabled(
            if: FakeWallClock.isAvailable || ProcessInfo.processInfo.environment["CI"] != nil,
            "Debian's libfaketime or a C compiler is missing"))
    func aWallClockSteppedBackAnHourThenForwardTwoLosesDoublesAndPrunesNothing() async throws {
        let (batch, late) = (300, 60)
        let payments =
            (0..<3 * batch).map { EndToEndSystem.payment("p\($0)", user: "u\($0)") }
            + (batch..<batch + late).map { EndToEndSystem.payment("q\($0)", user: "u\($0)") }
        let cluster = try await Cluster.start(
            purchases: 3 * batch, simulatorArguments: ["--latency-ms", "5", "--fault-rate", "0.02"],
            payments: payments)
        let clock = try FakeWallClock(folder: cluster.folder)
        let ledgerURL = "sqlite://\(cluster.folder.path)/ledger.sqlite"
        var environment = cluster.workerEnvironment(
            ledgerURL: ledgerURL, group: "clock-\(UUID().uuidString.prefix(6))", maxInFlight: 32)
        environment.merge([
            "RECONCILE_INTERVAL_MS": "2000", "RECONCILE_GRACE_MS": "45000", "RECONCILE_MAX_CALLS_PER_SECOND": "1000",
            "LEDGER_RETENTION_INTERVAL_MS": "2000", "LEDGER_RETENTION_PUBLISHED_OUTBOX_HOURS": "1",
        ]) { $1 }
        let worker = try clock.worker("worker", environment, folder: cluster.folder)
        let started = ContinuousClock.now
        defer { FakeWallClock.removeSharedMemory(of: worker) }
        let admin = "http://127.0.0.1:\(try await worker.adminPort())"
        func consumed() async throws -> Int { try await simulatorConsumes(cluster.simulatorURL).count }

        try await cluster.produce(range: 0..<batch)
        try await cluster.waitFor("the first batch is consumed", within: 90, workers: [worker]) {
            try await consumed() >= batch
        }
        // Running longer than the grace: from here only the sighting's age can hold the late purchases back (the
        // reconciler also waits a grace after intake starts flowing).
        try await Task.sleep(until: started + .seconds(50))
        try clock.set("-1h")
        try await worker.waitForLog("the wall clock stepped back", within: 10)
        // The late purchases' players last, so their grace starts just before the step forward.
        try await cluster.produce(range: batch + late..<2 * batch)
        try await cluster.waitFor("the second batch is consumed", within: 90, workers: [worker]) {
            try await consumed() >= 2 * batch - late
        }
        try await cluster.produce(range: batch..<batch + late)
        try await cluster.waitFor("the late purchases' players' purchases are consumed", within: 60, workers: [worker])
        {
            try await consumed() >= 2 * batch
        }
        // The reconciler has seen every late purchase (its sightings are in the ledger): their grace runs from here.
        let sightings = (batch..<batch + late).map { ReconciliationSighting(paymentSeq: "q\($0)", userId: "u\($0)") }
        try await cluster.waitFor("the reconciler sights every late purchase", within: 30, workers: [worker]) {
            try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) { store in
                try await store.reconciliationSightings(sightings, now: Date(), record: false).count == late
            }
        }
        try clock.set("+1h")
        try await worker.waitForLog("the wall clock stepped forward", within: 10)
        // Well within the grace by the monotonic clock, two hours past it by the wall clock's.
        let forwardAt = Date().addingTimeInterval(3_600).timeIntervalSince1970
        try await Task.sleep(for: .seconds(3))
        try await cluster.produce(
            (batch..<batch + late).map { ("u\($0)", EndToEndSystem.message("q\($0)", user: "u\($0)")) })
        try await cluster.produce(range: 2 * batch..<3 * batch)
        let all = 3 * batch + late
        try await cluster.waitFor("every purchase is consumed", within: 120, workers: [worker]) {
            try await consumed() == all
        }

        // A pruning pass that caught up after the step forward (its first pass is 30 s after the start).
        try await cluster.waitFor("a pruning pass after the step", within: 60, workers: [worker]) {
            try await Self.metric("iap_ledger_prune_caught_up_timestamp_seconds", admin) >= forwardAt
        }
        let consumes = try await simulatorConsumes(cluster.simulatorURL)
        #expect(consumes.values.allSatisfy { $0 == 1 }, "none consumed twice")
        try await LedgerStores.withStore(url: ledgerURL, logger: EndToEndSystem.logger) { store in
            let stats = try await store.stats()
            #expect(stats.consumed == all, "each granted once and consumed")
            #expect(stats.rejections.isEmpty)
            for i in batch..<batch + late {
                let grant = try await store.grant(paymentSeq: "q\(i)")
                #expect(grant?.origin == .message, "q\(i) taken by the reconciler within its grace")
            }
            var pruned: [String] = []
            for seq in (0..<3 * batch).map({ "p\($0)" }) where try await store.event(id: "\(seq):item-granted") == nil {
                pruned.append(seq)
            }
            #expect(pruned.isEmpty, "minutes old by the ledger's times, pruned: \(pruned.prefix(5)) (\(pruned.count))")
        }
        let granted = try await cluster.readTopic("iap.item-granted")
        #expect(granted.count == all, "one event per purchase")
        #expect(Set(granted.compactMap(\.eventID)).count == all)
        #expect(try await cluster.readTopic("purchase.completed.dlq").isEmpty)
        #expect(try await cluster.readTopic("iap.consume-failed").isEmpty)
        let metrics = try await httpGet("\(admin)/metrics").body
        #expect(try await Self.metric(#"iap_wall_clock_steps_total{direction="back"}"#, admin) >= 1, "\(metrics)")
        #expect(try await Self.metric(#"iap_wall_clock_steps_total{direction="forward"}"#, admin) >= 1)
        let back = worker.logLines(containing: "the wall clock stepped back").first?["clock.step_seconds"] as? String
        let forward =
            worker.logLines(containing: "the wall clock stepped forward").first?["clock.step_seconds"] as? String
        #expect(back.flatMap(Double.init).map { abs($0 + 3_600) < 5 } == true, "\(back ?? "no step back logged")")
        #expect(forward.flatMap(Double.init).map { abs($0 - 7_200) < 5 } == true, "\(forward ?? "none forward")")
        #expect(try await httpGet("\(admin)/readyz").status == 200)
        #expect(try await worker.terminate() == 0)
    }

    /// A sample's value in `/metrics` (0 when absent).
    static func metric(_ sample: String, _ admin: String) async throws -> Double {
        let body = try await httpGet("\(admin)/metrics").body
        let line = body.split(separator: "\n").first { $0.hasPrefix(sample + " ") }
        return line.flatMap { Double($0.dropFirst(sample.count + 1)) } ?? 0
    }
}

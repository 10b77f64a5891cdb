import App
import ArgumentParser
import Engine
import Foundation
import Fulfilment
import Ledger
import Logging
import Lookup
import Sandbox
import Wire

/// `iap-dev bench scale`: what the ledger's size costs. Fills one ledger with earlier purchases up to each size
/// and measures, at each, the worker's CPU per purchase (the pipeline benchmark against that ledger), lookups by id,
/// the sweeper's and the reconciler's queries and a pruning pass.
struct BenchScaleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scale",
        abstract: "Measures per-purchase cost, lookups, the sweeper's and reconciler's queries as the ledger grows.",
        discussion: """
            Purchases are synthetic (LedgerFill: a million a day, four per user, one rejection in twenty, the outbox \
            and unconfirmed rejections as retention keeps them); the ledger is filled up to each --sizes in turn. \
            --url must name a fresh, empty database: one holding any table (a ledger in use) is refused before \
            anything is written. Lookups, sweeper, reconciler and pruning figures are medians of --samples calls \
            (milliseconds); the per-purchase figures are the pipeline benchmark's (worker CPU per purchase, at \
            --latency-ms) against the filled ledger.
            """
    )

    @Option(help: "ledger.url to fill (default: SQLite in a temporary folder).") var url: String?
    @Option(help: "Ledger sizes (earlier purchases), ascending, comma-separated.") var sizes = "0,100000,1000000"
    @Option(help: "Purchases of each pipeline run (0: skip the pipeline).") var purchases = 10_000
    @Option(help: "Pipeline runs at each size (the median is reported).") var runs = 1
    @Option(help: "Simulated Gamebase latency of the pipeline runs, in milliseconds.") var latencyMs = 0
    @Option(help: "Calls timed per query.") var samples = 30
    @Flag(help: "Print one JSON object per size instead of a table.") var json = false

    func validate() throws {
        guard parsedSizes != nil else { throw ValidationError("--sizes must be ascending non-negative integers") }
        guard purchases >= 0, runs >= 1, samples >= 1, latencyMs >= 0 else {
            throw ValidationError("--purchases, --runs, --samples and --latency-ms must not be negative")
        }
    }

    var parsedSizes: [Int]? {
        let values = sizes.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !values.isEmpty, values.allSatisfy({ ($0 ?? -1) >= 0 }) else { return nil }
        let sizes = values.compactMap { $0 }
        return sizes == sizes.sorted() ? sizes : nil
    }

    struct Row: Codable, Sendable {
        var ledger = ""
        var earlierPurchases = 0
        var fillSeconds = 0.0
        var workerCPUMicrosecondsPerPurchase: Double?
        var throughput: Double?
        var lookupPaymentSeqMs = 0.0
        var lookupPaymentIdMs = 0.0
        var lookupUserMs = 0.0
        var sweeperUnconsumedMs = 0.0
        var sweeperUnpublishedMs = 0.0
        var sweeperCountsMs = 0.0
        var reconcilerCatchUpSeconds = 0.0
        var reconcilerPageMs = 0.0
        var reconcilerPageUsers = 0
        var reconcilerWholeWindowMs = 0.0
        var prunePassMs = 0.0
    }

    func run() async throws {
        var quiet = Logger(label: "iap-worker.bench")
        quiet.logLevel = .error
        let logger = quiet
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "iap-scale-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let url = self.url ?? "sqlite://\(folder.path)/ledger.sqlite"
        let sizes = parsedSizes ?? []
        let now = Date()
        let fill = LedgerFill(now: now, users: 250_000)
        let executable = try Executables.worker(given: nil)
        let options = self
        if self.url != nil {
            // Looked at before anything migrates or converts it: a ledger in use must never get synthetic purchases.
            let fresh = try await LedgerStores.withStore(url: url, logger: logger, migrate: false) {
                try await $0.holdsNoTables()
            }
            guard fresh else {
                throw ValidationError(
                    "--url names a database that already holds tables: bench scale fills a ledger with synthetic "
                        + "purchases and prunes it, so it only takes a fresh, empty database (never a ledger in use)")
            }
        }
        let rows = try await LedgerStores.withStore(
            url: url, logger: logger, maxConnections: 8, convertsToIncrementalVacuum: true
        ) { store -> [Row] in
            let (filling, reader, retention) = (store, store.roles.history, store.roles.retention)
            var rows: [Row] = []
            var filled = 0
            var pipelineEnded: ContinuousClock.Instant?
            for size in sizes {
                var row = Row(ledger: url.hasPrefix("postgres") ? "postgresql" : "sqlite", earlierPurchases: size)
                let started = ContinuousClock.now
                if size > filled {
                    if !options.json { print("filling \(filled) → \(size) earlier purchases…") }
                    try await filling.fill(fill, purchases: filled..<size)
                    filled = size
                }
                try await filling.analyze()
                row.fillSeconds = (ContinuousClock.now - started).seconds
                // The reconciler re-reads the grants of the last 2 minutes at each read (late commits): at a million a
                // day that is some 1,400; the pipeline runs write thousands a second. Its figures are taken once the
                // last run's grants are older than that, as at the fill's rate.
                if let pipelineEnded {
                    let quiet = pipelineEnded + .seconds(125)
                    if ContinuousClock.now < quiet {
                        if !options.json { print("waiting for the last pipeline run's grants to age past 2 minutes…") }
                        try await Task.sleep(until: quiet)
                    }
                }
                try await options.measureQueries(
                    size: size, store: store, reader: reader, retention: retention, now: now, into: &row, logger: logger
                )
                if options.purchases > 0 {
                    var results: [BenchmarkResult] = []
                    for run in 0..<options.runs {
                        var pipeline = PipelineBenchmark.Options(workerExecutable: executable)
                        pipeline.purchases = options.purchases
                        pipeline.latencyMs = options.latencyMs
                        pipeline.ledgerURL = url
                        pipeline.idPrefix = "n\(size)-r\(run)-\(UUID().uuidString.prefix(4))-"
                        results.append(try await PipelineBenchmark.run(pipeline, logger: logger) { _ in })
                    }
                    pipelineEnded = .now
                    row.workerCPUMicrosecondsPerPurchase = Self.median(results.map(\.workerCPUMicrosecondsPerPurchase))
                    row.throughput = Self.median(results.map(\.throughput))
                }
                options.report(row)
                rows.append(row)
            }
            return rows
        }
        if !json, rows.count > 1, let first = rows.first?.workerCPUMicrosecondsPerPurchase,
            let last = rows.last?.workerCPUMicrosecondsPerPurchase
        {
            print(
                String(format: "worker CPU per purchase, largest vs empty ledger: %+.1f %%", (last / first - 1) * 100))
        }
        if self.url == nil { try? FileManager.default.removeItem(at: folder) }
    }

    func measureQueries(
        size: Int, store: any SQLLedgerStore, reader: any HistoryLedger, retention: any RetentionLedger, now: Date,
        into row: inout Row, logger: Logger
    ) async throws {
        var generator = SystemRandomNumberGenerator()
        let pick: () -> Int = { size > 0 ? Int.random(in: 0..<size, using: &generator) : 0 }
        row.lookupPaymentSeqMs = try await time { _ = try await reader.history(paymentSeq: "fill-\(pick())") }
        row.lookupPaymentIdMs = try await time {
            _ = try await reader.paymentSeqs(paymentId: "GPA.fill-\(pick())", limit: 20)
        }
        row.lookupUserMs = try await time {
            _ = try await reader.purchases(userId: "fill-user-\(pick() % 250_000)", before: nil, limit: 20)
        }
        row.sweeperUnconsumedMs = try await time {
            _ = try await store.claimUnconsumedGrants(
                grantedBefore: Date().addingTimeInterval(-30), limit: 100, lease: .seconds(60), now: Date())
        }
        row.sweeperUnpublishedMs = try await time {
            _ = try await store.claimUnpublishedEvents(
                createdBefore: Date().addingTimeInterval(-30), limit: 100, lease: .seconds(60), now: Date())
        }
        row.sweeperCountsMs = try await time {
            _ = try await store.countUnconsumed()
            _ = try await store.oldestUnconsumedGrantedAt()
        }
        // The reconciler: the first refresh catches up with every grant of the window (2 s at most per call), then
        // each pass refreshes with what is new and reads a page of due users (12,000: 20 calls/s × 600 s).
        let since = Date().addingTimeInterval(-72 * 3_600)
        let catchUp = ContinuousClock.now
        while try await !store.refreshReconciliationUsers(activeSince: since) {}
        row.reconcilerCatchUpSeconds = (ContinuousClock.now - catchUp).seconds
        var pageUsers = 0
        row.reconcilerPageMs = try await time {
            try await store.refreshReconciliationUsers(activeSince: since)
            pageUsers = try await store.reconciliationUsers(activeSince: since, dueAt: Date(), limit: 12_000).count
        }
        row.reconcilerPageUsers = pageUsers
        row.reconcilerWholeWindowMs = try await time(samples: min(samples, 5)) {
            _ = try await store.reconciliationUsers(activeSince: since, dueAt: nil, limit: 12_000)
        }
        let pruner = LedgerPruner(
            ledger: retention, policy: RetentionPolicy(), metrics: WorkerMetrics(), logger: logger)
        row.prunePassMs = try await time(samples: min(samples, 5)) { _ = await pruner.pruneOnce() }
    }

    func report(_ row: Row) {
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: (try? encoder.encode(row)) ?? Data(), as: UTF8.self))
            return
        }
        let cpu = row.workerCPUMicrosecondsPerPurchase.map { String(format: "%.1f µs/purchase", $0) } ?? "-"
        let rate = row.throughput.map { String(format: "%.0f /s", $0) } ?? "-"
        print(
            """
            \(row.ledger), \(row.earlierPurchases) earlier purchases (filled in \(String(format: "%.1f", row.fillSeconds)) s)
              worker CPU          \(cpu), \(rate)
              find by paymentSeq  \(Self.ms(row.lookupPaymentSeqMs))   by paymentId \(Self.ms(row.lookupPaymentIdMs))   by userId \(Self.ms(row.lookupUserMs))
              sweeper             unconsumed \(Self.ms(row.sweeperUnconsumedMs))   unpublished \(Self.ms(row.sweeperUnpublishedMs))   counts \(Self.ms(row.sweeperCountsMs))
              reconciler          page of \(row.reconcilerPageUsers) due users \(Self.ms(row.reconcilerPageMs))   (catch-up \(String(format: "%.1f", row.reconcilerCatchUpSeconds)) s; whole window read \(Self.ms(row.reconcilerWholeWindowMs)))
              pruning pass        \(Self.ms(row.prunePassMs))
            """)
    }

    static func ms(_ value: Double) -> String { String(format: "%.2f ms", value) }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    /// The median of `samples` calls, in milliseconds.
    func time(samples: Int? = nil, _ body: () async throws -> Void) async throws -> Double {
        var times: [Double] = []
        for _ in 0..<(samples ?? self.samples) {
            let started = ContinuousClock.now
            try await body()
            times.append((ContinuousClock.now - started).seconds * 1_000)
        }
        return Self.median(times)
    }
}

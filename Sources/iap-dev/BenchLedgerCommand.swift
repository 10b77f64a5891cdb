import ArgumentParser
import Foundation
import Fulfilment
import Ledger
import Logging
import Wire

/// `iap-dev bench ledger`: the time of the grant transaction (grant row + outbox row) on a ledger.
struct BenchLedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Times the grant transaction (grant row + outbox event) on a ledger URL.",
        discussion: "Writes COUNT grants with fresh paymentSeqs, one after another, and prints latency percentiles."
    )

    @Option(help: "ledger.url: sqlite:///path or postgres://user:pass@host:port/db (default: a temporary SQLite file).")
    var url: String?
    @Option(help: "Grants to write.")
    var count: Int = 5_000
    @Flag(help: "Print JSON instead of a table.")
    var json = false

    func validate() throws {
        guard count > 0 else { throw ValidationError("--count must be positive") }
    }

    func run() async throws {
        var logger = Logger(label: "iap-worker.bench")
        logger.logLevel = .warning
        let url =
            self.url ?? "sqlite://\(FileManager.default.temporaryDirectory.path)/iap-bench-\(UUID().uuidString).sqlite"
        let count = self.count
        let runID = UUID().uuidString.prefix(8)
        let events = EventFactory(
            groupID: "bench", itemGrantedTopic: "iap.item-granted", consumeFailedTopic: "iap.consume-failed")
        let samples = try await LedgerStores.withStore(url: url, logger: logger) { store in
            var samples: [Double] = []
            samples.reserveCapacity(count)
            let clock = ContinuousClock()
            for i in 0..<count {
                let grant = GrantRecord(
                    paymentSeq: "bench-\(runID)-\(i)", userId: "user-\(i % 1000)", gamebaseProductId: "gem_pack_100",
                    purchaseToken: "tok-\(runID)-\(i)", productSeq: 1000, marketId: "GG", productType: "CONSUMABLE",
                    price: "1200", currency: "KRW", paymentId: "GPA.\(i)", purchaseTime: "2024-05-13T10:20:30+09:00",
                    grantedAt: Date(),
                    source: MessageSource(topic: "purchase.completed", partition: 0, offset: Int64(i)))
                let event = events.itemGranted(grant)
                let started = clock.now
                _ = try await store.insertGrant(grant, event: event)
                let elapsed = clock.now - started
                samples.append(Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6)
            }
            return samples.sorted()
        }
        func percentile(_ p: Double) -> Double { samples[min(samples.count - 1, Int(Double(samples.count) * p))] }
        let report: [(String, Double)] = [
            ("p50", percentile(0.5)), ("p90", percentile(0.9)), ("p99", percentile(0.99)), ("max", samples.last ?? 0),
        ]
        let store = (try? LedgerURL(url)).map { "\($0)" } ?? url
        if json {
            let fields = report.map { "\"\($0.0)_us\":\(String(format: "%.1f", $0.1))" }.joined(separator: ",")
            print("{\"ledger\":\"\(store)\",\"grants\":\(count),\(fields)}")
        } else {
            print("grant transaction on \(store), \(count) grants")
            for (name, value) in report {
                print(
                    "  \(name.padding(toLength: 4, withPad: " ", startingAt: 0)) \(String(format: "%8.1f", value)) µs")
            }
        }
    }
}

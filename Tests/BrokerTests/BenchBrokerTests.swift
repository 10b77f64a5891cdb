import Foundation
import IAPTestSupport
import Kafka
import KafkaTesting
import Testing

@testable import SystemTestSupport

/// `iap-dev bench` against a real broker process it did not start: the pipeline benchmark's `--bootstrap` path.
@Suite("iap-dev bench against a real broker", .timeLimit(.minutes(5)), .tags(.librdkafka))
struct BenchBrokerTests {
    /// `bench --bootstrap` against a real broker the test started (Tansu): topics of the run's own, every purchase
    /// consumed once, and the report names the broker and librdkafka.
    @Test(
        .enabled(
            if: !Librdkafka.misreadsTaggedFields, "needs librdkafka 2.2.0 or later (earlier ones cannot speak to Tansu)"
        ))
    func thePipelineBenchmarkRunsAgainstARealBrokerGivenByItsAddress() async throws {
        let broker = try TansuBroker()
        defer { broker.stop() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "iap-bench-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let bench = try ChildProcess(
            "bench",
            [
                "bench", "--bootstrap", broker.bootstrapServers, "--purchases", "300", "--warmup", "20",
                "--latency-ms", "5", "--json",
            ], folder: folder)
        #expect(try await bench.exitStatus(within: 180) == 0, "\(bench.output)")
        let text = try String(contentsOfFile: bench.stdoutPath, encoding: .utf8)
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(bench.output)")
        #expect(object["kafka"] as? String == "external \(broker.bootstrapServers)")
        #expect(object["librdkafka"] as? String == Librdkafka.versionString)
        #expect(object["consumedTwice"] as? Int == 0)
        #expect((object["throughput"] as? Double ?? 0) > 0)
        #expect((object["workerCPUMicrosecondsPerPurchase"] as? Double ?? 0) > 0)
    }
}

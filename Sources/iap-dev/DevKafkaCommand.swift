import App
import ArgumentParser
import Kafka
import KafkaTesting
import Logging
import ServiceLifecycle
import UnixSignals

struct DevKafkaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev-kafka",
        abstract: "A local Kafka endpoint from librdkafka's mock cluster; prints the bootstrap servers first."
    )

    @Option(help: "Number of mock brokers.")
    var brokers: Int = 3

    @Option(name: .customLong("topic"), help: "A topic to create, as NAME:PARTITIONS (repeatable).")
    var topics: [String] = []

    func validate() throws {
        guard brokers >= 1 else { throw ValidationError("--brokers must be at least 1") }
        for topic in topics { _ = try Self.parseTopic(topic) }
    }

    static func parseTopic(_ text: String) throws -> (name: String, partitions: Int) {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, !parts[0].isEmpty, let partitions = Int(parts[1]), partitions > 0 else {
            throw ValidationError("--topic takes NAME:PARTITIONS with PARTITIONS > 0, got \"\(text)\"")
        }
        return (parts[0], partitions)
    }

    func run() async throws {
        let logger = Logger(label: "iap-worker.dev-kafka")
        let cluster = try MockCluster(brokers: brokers, logger: logger)
        for topic in topics {
            let (name, partitions) = try Self.parseTopic(topic)
            try cluster.createTopic(name, partitions: partitions)
        }
        // The first line is the bootstrap string, for scripts and process-level tests.
        print(cluster.bootstrapServers)
        for topic in topics { print("topic \(topic)") }
        fflushStandardOutput()
        let group = ServiceGroup(
            services: [WaitForShutdown()], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        try await group.run()
        withExtendedLifetime(cluster) {}
    }
}

/// A service that only waits for graceful shutdown: keeps a command alive until SIGTERM/SIGINT.
struct WaitForShutdown: Service {
    func run() async throws {
        try? await gracefulShutdown()
    }
}

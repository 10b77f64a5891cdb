import App
import ArgumentParser

@main
struct IAPDev: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "iap-dev",
        abstract:
            "iap-worker's development tools: the demo, the benchmarks and the local stand-ins for Kafka and Gamebase.",
        discussion: """
            Not for production: the operator's executable is iap-worker. These tools link librdkafka's mock cluster and \
            the Gamebase simulator, which iap-worker does not.
            """,
        version: WorkerMetrics.version,
        subcommands: [
            DemoCommand.self, BenchCommand.self, DevKafkaCommand.self, GamebaseSimCommand.self, AppStoreSimCommand.self,
            GooglePlaySimCommand.self,
        ]
    )
}

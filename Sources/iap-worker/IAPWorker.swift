import ArgumentParser
import Worker

@main
struct IAPWorker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "iap-worker",
        abstract: "Fulfils Gamebase in-app purchases from Kafka, exactly once.",
        version: WorkerMetrics.version,
        subcommands: [
            RunCommand.self, DemoCommand.self, ReprocessCommand.self, ReconcileCommand.self, LedgerCommand.self,
            FindCommand.self, CheckConfigCommand.self, EventsCommand.self, DevKafkaCommand.self, GamebaseSimCommand.self,
            BenchCommand.self,
        ]
    )
}

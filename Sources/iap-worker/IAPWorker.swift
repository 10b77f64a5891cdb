import ArgumentParser

@main
struct IAPWorker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "iap-worker",
        abstract: "Fulfils Gamebase in-app purchases from Kafka, exactly once.",
        version: IAPWorkerVersion.current,
        subcommands: [
            RunCommand.self, DemoCommand.self, ReprocessCommand.self, LedgerCommand.self, CheckConfigCommand.self, DevKafkaCommand.self,
            GamebaseSimCommand.self, BenchCommand.self,
        ]
    )
}

enum IAPWorkerVersion {
    static let current = "0.1.0"
}

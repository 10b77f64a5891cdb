import App
import ArgumentParser

@main
struct IAPWorker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "iap-worker",
        abstract: "Fulfils Gamebase in-app purchases from Kafka, exactly once.",
        discussion: """
            The development tools (demo, bench, dev-kafka, gamebase-sim) are a separate executable, iap-dev, which \
            the image does not ship.
            """,
        version: WorkerMetrics.version,
        subcommands: [
            RunCommand.self, ReprocessCommand.self, ReconcileCommand.self, LedgerCommand.self, FindCommand.self,
            CheckConfigCommand.self, EventsCommand.self,
        ]
    )
}

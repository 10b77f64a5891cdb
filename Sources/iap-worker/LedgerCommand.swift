import App
import ArgumentParser
import Foundation
import Fulfilment
import Ledger
import Logging

struct LedgerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Looks into the ledger: one paymentSeq's history, or counts by state.",
        subcommands: [Show.self, Stats.self]
    )

    struct Options: ParsableArguments {
        @Option(name: .customLong("config"), help: "YAML configuration file (default: $IAP_WORKER_CONFIG).")
        var configFile: String?
        @Option(help: "ledger.url, instead of the configuration's.")
        var url: String?

        func ledgerURL() async throws -> String {
            if let url { return url }
            return try await WorkerConfiguration.load(configFile: configFile).ledgerURL
        }
    }

    static var quietLogger: Logger {
        var logger = Logger(label: "iap-worker.ledger")
        logger.logLevel = .critical
        return logger
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Prints one paymentSeq's grant, rejections and events.")
        @OptionGroup var options: Options
        @Argument(help: "The paymentSeq.") var paymentSeq: String

        func run() async throws {
            let seq = paymentSeq
            let found = try await LedgerStores.withStore(
                url: try await options.ledgerURL(), logger: LedgerCommand.quietLogger, migrate: false
            ) {
                store -> Bool in
                let grant = try await store.grant(paymentSeq: seq)
                let rejections = try await store.rejections(paymentSeq: seq)
                let events = try await store.events(paymentSeq: seq)
                print("paymentSeq \(seq)")
                if let grant {
                    print("  grant: \(grant.state.rawValue)")
                    print(
                        "    userId \(grant.userId), product \(grant.gamebaseProductId), price \(grant.price ?? "-") \(grant.currency ?? "")"
                    )
                    print(
                        "    granted \(Self.time(grant.grantedAt)), consumed \(grant.consumedAt.map(Self.time) ?? "not yet")"
                    )
                    print(
                        "    consume attempts \(grant.consumeAttempts), last result code \(grant.lastResultCode.map(String.init) ?? "-")"
                    )
                    print("    event published \(grant.eventPublishedAt.map(Self.time) ?? "not yet")")
                    if let source = grant.source {
                        print("    from \(source.topic)[\(source.partition)]@\(source.offset)")
                    }
                    if grant.origin == .reconciliation {
                        print("    found by reconciliation (List Consumables): no message reported it")
                    }
                } else {
                    print("  grant: none")
                }
                for rejection in rejections {
                    print(
                        "  rejection: \(rejection.reason) for userId \(rejection.key.userId) at \(Self.time(rejection.rejectedAt))"
                    )
                    print("    \(rejection.detail ?? "")\(rejection.resultCode.map { " (resultCode \($0))" } ?? "")")
                }
                for event in events {
                    print(
                        "  event \(event.id) -> \(event.topic), \(event.publishedAt.map { "published \(Self.time($0))" } ?? "NOT PUBLISHED")"
                    )
                }
                return grant != nil || !rejections.isEmpty
            }
            if !found { throw ExitCode(3) }
        }

        static func time(_ date: Date) -> String { date.formatted(.iso8601) }
    }

    struct Stats: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Prints counts by state.")
        @OptionGroup var options: Options

        func run() async throws {
            let stats = try await LedgerStores.withStore(
                url: try await options.ledgerURL(), logger: LedgerCommand.quietLogger, migrate: false
            ) {
                try await $0.stats()
            }
            print("granted, awaiting Consume  \(stats.granted)")
            print("consumed                   \(stats.consumed)")
            print("rejected                   \(stats.rejections.values.reduce(0, +))")
            for (reason, count) in stats.rejections.sorted(by: { $0.key < $1.key }) {
                print("  \(reason.padding(toLength: 24, withPad: " ", startingAt: 0)) \(count)")
            }
            print("events not yet published   \(stats.unpublishedEvents)")
        }
    }
}

import App
import ArgumentParser
import Engine
import Foundation
import Fulfilment
import Gamebase
import GamebaseHTTP
import Ledger
import Logging
import Lookup

struct FindCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find",
        abstract: "Finds purchases by any id a player or a system holds and prints each one's whole story.",
        discussion: """
            Takes a paymentSeq, a store payment id (Gamebase's paymentId: a Google order id GPA.…, an Apple \
            transaction id), a userId, or an event id (<paymentSeq>:item-granted, <paymentSeq>:consume-failed:…, \
            <topic>/<partition>/<offset>:consume-failed), and decides which it is: an event id by its shape, otherwise \
            the first of paymentSeq, payment id, userId and store notification id under which the ledger holds \
            anything (--payment-seq, --payment-id, --user, --event-id or --notification-id say it). Prints each matching purchase as one timeline, oldest first, \
            every line with its time (UTC) and where it came from: the message (topic, partition, offset, timestamp, \
            claimed userId, token hash — never the token) and the duplicates after it, Gamebase's verdict, the grant, \
            every Consume attempt, the events, each rejected claim, dead letters and what reprocess made of them, \
            reconciliation sightings, and the stores' refunds: each notification, the revocation and its reversal, \
            the answers to Apple's consumption requests; a refund of a payment the ledger never saw is found by its \
            store payment id. A userId lists the user's purchases newest first, --limit at a time; the last \
            line gives the --before of the next page: the last purchase's first appearance and paymentSeq \
            (<RFC 3339 time>/<paymentSeq>), so purchases of the same millisecond are never skipped; a time alone \
            lists those first seen before it. --gamebase asks Gamebase now (read-only: Get Payment \
            Transaction, and List Consumables where the ledger holds no token) and says in one line what differs. \
            Exit 0 found, 1 nothing found, 2 the ledger or Gamebase could not be asked.
            """
    )

    @Argument(help: "The ids to look for.") var ids: [String] = []
    @Option(name: .customLong("config"), help: "YAML configuration file (default: $IAP_WORKER_CONFIG).")
    var configFile: String?
    @Option(help: "ledger.url, instead of the configuration's (--gamebase still needs the configuration).")
    var url: String?
    @Option(name: .customLong("user"), help: "A userId (repeatable).") var users: [String] = []
    @Option(name: .customLong("payment-id"), help: "A store payment id (repeatable).") var paymentIds: [String] = []
    @Option(name: .customLong("payment-seq"), help: "A paymentSeq (repeatable).") var paymentSeqs: [String] = []
    @Option(name: .customLong("event-id"), help: "A CloudEvent id (repeatable).") var eventIds: [String] = []
    @Option(
        name: .customLong("notification-id"),
        help: "A store notification id: Apple's notificationUUID, or the id a Google notification was recorded under.")
    var notificationIds: [String] = []
    @Option(help: "For a userId: purchases per page, newest first (1…1000).") var limit = 20
    @Option(
        help: ArgumentHelp(
            """
            For a userId: the page after this cursor, as the previous page's last line gives it \
            (<RFC 3339 time>/<paymentSeq>), or a time alone: purchases first seen before it.
            """, valueName: "cursor"))
    var before: String?
    @Flag(help: "Print JSON, one object per id (docs/schemas/find-output.schema.json).") var json = false
    @Flag(help: "Also ask Gamebase now (read-only) and say what differs from the ledger.") var gamebase = false

    var queries: [(String, IdentifierKind?)] {
        ids.map { ($0, nil) } + paymentSeqs.map { ($0, .paymentSeq) } + paymentIds.map { ($0, .paymentId) }
            + users.map { ($0, .userId) } + eventIds.map { ($0, .eventId) }
            + notificationIds.map { ($0, .notificationId) }
    }

    func validate() throws {
        if queries.isEmpty { throw ValidationError("give an id to look for") }
        if queries.contains(where: { $0.0.isEmpty }) { throw ValidationError("an id must not be empty") }
        if queries.contains(where: { $0.0.utf8.count > 1_024 }) { throw ValidationError("an id is at most 1024 bytes") }
        if !(1...1_000).contains(limit) { throw ValidationError("--limit must be 1…1000") }
        if let before, CursorText.purchase(before) == nil {
            throw ValidationError("--before must be \(CursorText.purchaseForm)")
        }
    }

    func run() async throws {
        let configuration: WorkerConfiguration?
        do {
            configuration = url == nil || gamebase ? try await WorkerConfiguration.load(configFile: configFile) : nil
        } catch {
            FileHandle.standardError.write(Data("iap-worker find: \(error)\n".utf8))
            throw ExitCode(2)
        }
        let ledgerURL = url ?? configuration?.ledgerURL ?? ""
        let logger = LedgerCommand.quietLogger
        let queries = queries
        let before = before.flatMap(CursorText.purchase)
        let (limit, json, askGamebase) = (limit, json, gamebase)
        let grace = configuration?.reconcile.grace
        let results: [FindResult]
        do {
            results = try await LedgerStores.withStore(
                url: ledgerURL, logger: logger, migrate: false, maxConnections: 2
            ) {
                store -> [FindResult] in
                let reader = store.roles.history
                let finder = PurchaseFinder(reader: reader, refunds: store.roles.refunds, reconcileGrace: grace)
                var results: [FindResult] = []
                for (id, kind) in queries {
                    var result = try await finder.find(id, as: kind, before: before, limit: limit)
                    // Nothing in the ledger: with --gamebase, the id may be a user whose payment never came.
                    if askGamebase, result.kind == nil { result.kind = .userId }
                    results.append(result)
                }
                guard askGamebase, let configuration else { return results }
                let client = GamebaseClient(configuration: configuration.gamebaseConfiguration, logger: logger)
                let comparer = GamebaseComparer(gamebase: client)
                for index in results.indices {
                    results[index] = await comparer.annotate(results[index]) {
                        try await reader.history(paymentSeq: $0)
                    }
                }
                try? await client.shutdown()
                return results
            }
        } catch {
            FileHandle.standardError.write(
                Data("iap-worker find: the ledger could not be read: \(Self.describe(error))\n".utf8))
            throw ExitCode(2)
        }
        for result in results {
            print(json ? FindOutput(result).json() : FindTextRenderer.render(result), terminator: json ? "\n" : "")
        }
        if results.contains(where: { $0.purchases.contains { $0.gamebase?.unreachable == true } }) { throw ExitCode(2) }
        if results.allSatisfy({ $0.purchases.isEmpty }) { throw ExitCode(1) }
    }

    /// A ledger error's own text (it never holds a password or a token); anything else by its type.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? LedgerError else { return "\(type(of: error))" }
        let text = error.description
        // A ledger at an older schema (no worker of this version has started on it yet) lacks the tables find reads.
        if text.contains("no such table") || text.contains("no such column") || text.contains("does not exist") {
            return text
                + " — the ledger's schema is older than this iap-worker's: start `iap-worker run` of this version "
                + "once (it migrates the ledger), then look again"
        }
        return text
    }
}

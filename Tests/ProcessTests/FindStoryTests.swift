import App
import Engine
import Foundation
import Fulfilment
import Gamebase
import GamebaseHTTP
import GamebaseSimulator
import IAPTestSupport
import Kafka
import KafkaTesting
import Ledger
import Lookup
import Testing

@testable import SystemTestSupport

/// Every kind of purchase story, made by the real worker (mock cluster, the simulator over HTTP, a real ledger), then
/// found by every id it has — as `iap-worker find` (the executable, text and `--json`) and through the finder the
/// console shares.
@Suite("Finding any purchase by any id", .serialized, .timeLimit(.minutes(6)))
struct FindStoryTests {
    static let stolenTokenHash = PurchaseTimeline.shortHash(
        GrantRecord(
            paymentSeq: "st3", userId: "u3", gamebaseProductId: "g", purchaseToken: "tok-st3", grantedAt: Date()
        ).tokenHash)

    static var payments: [SimulatedPayment] {
        [
            EndToEndSystem.payment("g1", user: "u1"), EndToEndSystem.payment("r2", user: "u2"),
            EndToEndSystem.payment("st3", user: "u3"), EndToEndSystem.payment("dl4", user: "u4"),
            EndToEndSystem.payment("cf5", user: "u5"), EndToEndSystem.payment("p7", user: "u7"),
            EndToEndSystem.payment("c8", user: "u8", consumed: true),
        ]
    }

    // The worker under test opens its ledger by `ledger.url`.
    @Test(arguments: LedgerBackend.sql)
    func eachStoryIsFoundByEveryIdItHasInOrder(backend: LedgerBackend) async throws {
        let faults = SimulatorFaults(
            unknownFieldRate: 0, tokenResultCodes: ["tok-dl4": GamebaseResultCode.unknownError.rawValue],
            consumeResultCodes: ["cf5": GamebaseResultCode.unknownError.rawValue])
        try await EndToEndSystem.run(backend, payments: Self.payments, faults: faults) { system in
            var configuration = system.configuration()
            configuration.sweepInterval = .seconds(600)
            let reader = try await Self.makeStories(system, configuration)
            let finder = PurchaseFinder(reader: reader.reader)
            defer { reader.close() }

            // Granted, a duplicate after it.
            for id in ["g1", "GPA.g1", "u1", "g1:item-granted"] {
                let result = try await finder.find(id)
                let purchase = try #require(result.purchases.first, "\(id)")
                #expect(result.purchases.count == 1, "\(id)")
                #expect(purchase.paymentSeq == "g1")
                #expect(purchase.status == "granted and consumed")
                #expect(Self.kinds(purchase) == ["message", "verdict", "grant", "event", "consume"], "\(id)")
                #expect(purchase.entries.first?.fields["duplicates_after"] == "1")
                #expect(purchase.entries.first?.fields["topic"] == "purchase.completed")
                #expect(purchase.entries.first?.fields["message_time"] != nil)
            }
            #expect(try await finder.find("GPA.g1").kind == .paymentId)
            #expect(try await finder.find("u1").kind == .userId)
            #expect(try await finder.find("g1:item-granted").kind == .eventId)

            // Granted by reconciliation: no message.
            for id in ["r2", "GPA.r2", "u2", "r2:item-granted"] {
                let purchase = try #require(try await finder.find(id).purchases.first, "\(id)")
                #expect(Self.kinds(purchase) == ["sighting", "verdict", "grant", "event", "consume"], "\(id)")
                #expect(purchase.entries.first?.origin == .reconciliation)
                #expect(purchase.entries.first?.summary.contains("no message reported it") == true)
            }

            // A stolen claim rejected, then the owner granted.
            let stolen = try #require(try await finder.find("st3").purchases.first)
            #expect(
                Self.kinds(stolen) == [
                    "message", "verdict", "rejection", "event", "message", "verdict", "grant", "event", "consume",
                ])
            #expect(stolen.entries[0].fields["user_id"] == "thief")
            #expect(stolen.entries[2].fields["reason"] == "user_mismatch")
            #expect(stolen.entries[4].fields["user_id"] == "u3")
            #expect(stolen.userId == "u3")
            let rejectionEventID = try #require(stolen.entries[2].fields["event_id"])
            #expect(try await finder.find(rejectionEventID).purchases.first?.paymentSeq == "st3")
            #expect(
                try await finder.find("thief").purchases.map(\.paymentSeq) == ["st3"],
                "a claim in a user's name lists it")
            #expect(try await finder.find("GPA.st3").purchases.map(\.paymentSeq) == ["st3"])
            #expect(try await finder.find("u3").purchases.map(\.paymentSeq) == ["st3"])

            // Dead-lettered (gamebase_unavailable), reprocessed, granted.
            for id in ["dl4", "GPA.dl4", "u4", "dl4:item-granted"] {
                let purchase = try #require(try await finder.find(id).purchases.first, "\(id)")
                #expect(
                    Self.kinds(purchase) == [
                        "dead_letter", "message", "verdict", "grant", "event", "consume", "reprocessed",
                    ],
                    "\(id)")
                #expect(purchase.entries[0].fields["reason"] == "gamebase_unavailable")
                #expect(purchase.entries[0].fields["dead_letter_topic"] == "purchase.completed.dlq")
                #expect(purchase.entries[0].fields["dead_letter_offset"] != nil)
                #expect(purchase.entries.last?.fields["outcome"] == "granted")
                #expect(purchase.status == "granted and consumed")
            }

            // Granted, Consume still failing.
            let pending = try #require(try await finder.find("cf5").purchases.first)
            #expect(pending.status.hasPrefix("granted, Consume pending"))
            #expect(Self.kinds(pending).prefix(4) == ["message", "verdict", "grant", "event"])
            #expect(Self.kinds(pending).last == "consume")
            #expect(pending.entries.last?.fields["pending"] == "true")
            #expect(pending.entries.contains { $0.kind == .consume && $0.fields["result_code"] == "9999" })
            #expect(try await finder.find("GPA.cf5").purchases.map(\.paymentSeq) == ["cf5"])

            // Malformed: found by its event id (where it was read), its paymentSeq and its userId.
            let malformed = try #require(
                try await reader.reader.deadLetters(reason: "malformed_message", before: nil, limit: 5).first)
            let original = try #require(malformed.original)
            let malformedEventID = "\(original.topic)/\(original.partition)/\(original.offset):consume-failed"
            for id in [malformedEventID, "m6", "u6"] {
                let purchase = try #require(try await finder.find(id).purchases.first, "\(id)")
                #expect(Self.kinds(purchase) == ["dead_letter"], "\(id)")
                #expect(purchase.entries[0].fields["reason"] == "malformed_message")
                #expect(purchase.status == "dead-lettered (malformed_message), waiting for reprocess")
            }
            #expect(try await finder.find(malformedEventID).kind == .eventId)

            // Nothing: said so.
            let nothing = try await finder.find("no-such-id")
            #expect(nothing.kind == nil && nothing.purchases.isEmpty)

            // Gamebase now, side by side (read-only).
            let client = GamebaseClient(
                configuration: configuration.gamebaseConfiguration, logger: EndToEndSystem.logger)
            let comparer = GamebaseComparer(gamebase: client)
            let consumesBefore = system.simulator.state.consumes
            func difference(_ id: String, as kind: IdentifierKind? = nil) async throws -> [String] {
                try await comparer.annotate(finder.find(id, as: kind)).purchases.compactMap { $0.gamebase?.difference }
            }
            #expect(try await difference("g1") == ["no difference: granted and consumed"])
            #expect(try await difference("cf5") == ["granted, Consume still pending"])
            #expect(try await difference("u7", as: .userId) == ["paid and unconsumed at Gamebase, no grant here"])
            #expect(try await difference("c8") == ["consumed at Gamebase, no grant here"])
            #expect(system.simulator.state.consumes == consumesBefore, "--gamebase never consumes")
            try? await client.shutdown()

            try await Self.checkTheCommand(
                system: system, configuration: configuration, malformedEventID: malformedEventID)
        }
    }

    static func kinds(_ purchase: PurchaseTimeline) -> [String] { purchase.entries.map(\.kind.rawValue) }

    struct OpenReader: Sendable {
        let reader: any HistoryLedger
        let close: @Sendable () -> Void
    }

    /// Makes every story with the real worker, reconciler and reprocessor, then opens the ledger for reading.
    static func makeStories(_ system: EndToEndSystem, _ configuration: WorkerConfiguration) async throws -> OpenReader {
        try await system.withWorker(configuration) { _ in
            try await system.produce([(key: "thief", value: EndToEndSystem.message("st3", user: "thief"))])
            try await Self.until(system, "the stolen claim is rejected and its event published") { ledger in
                let events = try await ledger.events(paymentSeq: "st3")
                return try await ledger.rejections(paymentSeq: "st3").count == 1 && events.count == 1
                    && events.allSatisfy { $0.publishedAt != nil }
            }
            try await system.produce([
                (key: "u1", value: EndToEndSystem.message("g1", user: "u1")),
                (key: "u3", value: EndToEndSystem.message("st3", user: "u3")),
                (key: "u4", value: EndToEndSystem.message("dl4", user: "u4")),
                (key: "u5", value: EndToEndSystem.message("cf5", user: "u5")),
                (key: "u6", value: #"{"userId":"u6","paymentSeq":"m6"}"#),
                (key: "u8", value: EndToEndSystem.message("c8", user: "u8")),
            ])
            try await Self.until(system, "every message has its outcome") { ledger in
                let g1 = try await ledger.grant(paymentSeq: "g1")
                let st3 = try await ledger.grant(paymentSeq: "st3")
                let cf5 = try await ledger.grant(paymentSeq: "cf5")
                let reader: any HistoryLedger = ledger
                let dl4 = try await reader.history(paymentSeq: "dl4").deadLetters
                let m6 = try await reader.history(paymentSeq: "m6").deadLetters
                let c8 = try await ledger.rejections(paymentSeq: "c8")
                return g1?.state == .consumed && st3?.state == .consumed && (cf5?.consumeAttempts ?? 0) >= 1
                    && !dl4.isEmpty
                    && !m6.isEmpty && !c8.isEmpty
            }
            try await system.produce([(key: "u1", value: EndToEndSystem.message("g1", user: "u1"))])
            try await Self.until(system, "the duplicate is counted") {
                try await $0.history(paymentSeq: "g1").grantDuplicates == 1
            }
        }
        // Reconciliation finds r2, which no message reported; reprocess re-drives dl4 once Gamebase takes its token.
        var faults = system.simulator.state.faults
        faults.tokenResultCodes = [:]
        system.simulator.state.faults = faults
        let reconciling = {
            var reconciling = configuration
            reconciling.reconcile.grace = .zero
            return reconciling
        }()
        try await LedgerStores.withStore(url: configuration.ledgerURL, logger: EndToEndSystem.logger) { ledger in
            let client = GamebaseClient(
                configuration: configuration.gamebaseConfiguration, logger: EndToEndSystem.logger)
            let report = try await WorkerApplication.reconcileOnce(
                configuration: reconciling, ledger: ledger.roles, gamebase: client, users: ["u2"], dryRun: false,
                logger: EndToEndSystem.logger)
            #expect(report.outcomes[.granted] == 1)
            let reprocessed = try await WorkerApplication.reprocess(
                configuration: configuration, ledger: ledger.roles, gamebase: client,
                options: .init(reason: "gamebase_unavailable"), idle: .seconds(10), logger: EndToEndSystem.logger)
            #expect(reprocessed.outcomes["gamebase_unavailable"]?["granted"] == 1)
            try? await client.shutdown()
        }
        let url = configuration.ledgerURL
        let opened = Shared<(any SQLLedgerStore)?>(nil)
        let task = Task {
            try await LedgerStores.withStore(url: url, logger: EndToEndSystem.logger, migrate: false) { store in
                opened.withLock { $0 = store }
                while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(50)) }
            }
        }
        while opened.value == nil { try await Task.sleep(for: .milliseconds(20)) }
        let reader: any HistoryLedger = try #require(opened.value)
        return OpenReader(reader: reader, close: { task.cancel() })
    }

    static func until(
        _ system: EndToEndSystem, _ what: String,
        _ condition: @escaping @Sendable (any SQLLedgerStore) async throws -> Bool
    ) async throws {
        try await LedgerStores.withStore(url: system.ledgerURL, logger: EndToEndSystem.logger, migrate: false) {
            ledger in
            try await system.eventually(what, within: 60) { try await condition(ledger) }
        }
    }

    /// `iap-worker find` as a user runs it: exit codes, the text, `--json` against its schema (with jsonschema, the
    /// reference validator), and no token or secret anywhere in what it prints.
    static func checkTheCommand(system: EndToEndSystem, configuration: WorkerConfiguration, malformedEventID: String)
        async throws
    {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("find-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let config = folder.appendingPathComponent("iap-worker.yaml")
        try """
        kafka:
          bootstrap_servers: "\(system.cluster.bootstrapServers)"
        gamebase:
          base_url: "\(system.simulatorURL)"
          app_id: "\(EndToEndSystem.appID)"
          secret_key: "\(EndToEndSystem.secretKey)"
        ledger:
          url: "\(configuration.ledgerURL)"
        """.write(to: config, atomically: true, encoding: .utf8)
        func find(_ arguments: [String]) async throws -> (status: Int32, output: String) {
            let child = try ChildProcess("find", ["find", "--config", config.path] + arguments, folder: folder)
            let status = try await child.exitStatus(within: 60)
            return (status, (try? String(contentsOfFile: child.stdoutPath, encoding: .utf8)) ?? "")
        }
        var everything = ""
        let text = try await find(["st3", "GPA.dl4", "u5", malformedEventID, "--gamebase"])
        everything += text.output
        #expect(text.status == 0, "\(text.output)")
        #expect(text.output.contains("purchase st3  userId u3"))
        #expect(text.output.contains("claim by userId thief rejected: user_mismatch"))
        #expect(text.output.contains("token \(Self.stolenTokenHash)"))
        #expect(text.output.contains("dead-lettered for gamebase_unavailable"))
        #expect(text.output.contains("re-driven by iap-worker reprocess: granted"))
        #expect(text.output.contains("gamebase now"))
        #expect(text.output.contains("granted, Consume still pending"))
        #expect(text.output.contains("dead-lettered for malformed_message"))

        let json = try await find(["--json", "g1", "u1", "r2", "cf5", "no-such-id", "--user", "u7", "--gamebase"])
        everything += json.output
        #expect(json.status == 0)
        let lines = json.output.split(separator: "\n").map(String.init)
        #expect(lines.count == 6)
        let file = folder.appendingPathComponent("find.jsonl")
        try json.output.write(to: file, atomically: true, encoding: .utf8)
        let validation = try OutsideTools.run(
            try OutsideTools.run("/bin/bash", ["scripts/check-venv.sh"], stderr: false).output
                .trimmingCharacters(in: .whitespacesAndNewlines),
            [
                "-c",
                """
                import json, sys, jsonschema
                schema = json.load(open("docs/schemas/find-output.schema.json"))
                validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
                lines = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
                errors = [f"{i}: {e.message}" for i, line in enumerate(lines) for e in validator.iter_errors(line)]
                print("\\n".join(errors) or "valid")
                sys.exit(1 if errors else 0)
                """,
                file.path,
            ])
        #expect(validation.status == 0, "\(validation.output)")
        let first = try #require(
            lines.first.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        #expect(first["kind"] as? String == "payment_seq")
        #expect((first["purchases"] as? [[String: Any]])?.first?["status"] as? String == "granted and consumed")
        // Nothing in the ledger: with --gamebase the id is also asked about as a userId (a payment whose message never
        // came); Gamebase knows nothing of it either.
        #expect(lines[4].contains(#""found":false"#) && lines[4].contains(#""purchases":[]"#))

        let missing = try await find(["no-such-id"])
        #expect(missing.status == 1)
        let missingJSON = try await find(["no-such-id", "--json"])
        #expect(missingJSON.status == 1)
        #expect(missingJSON.output.contains(#""found":false"#) && missingJSON.output.contains(#""kind":null"#))
        // A bare id the ledger never saw, asked with --gamebase: a user whose payment never came is found at Gamebase.
        let neverReported = try await find(["u7", "--gamebase"])
        #expect(neverReported.status == 0)
        #expect(neverReported.output.contains("paid and unconsumed at Gamebase, no grant here"))
        #expect(missing.output.contains("nothing found for no-such-id"))
        let unreachable = try await ChildProcess(
            "find-down", ["find", "--url", "sqlite:///nonexistent-folder-\(UUID().uuidString)/ledger.sqlite", "g1"],
            folder: folder
        ).exitStatus(within: 60)
        #expect(unreachable == 2)

        for secret in ["tok-", EndToEndSystem.secretKey] {
            #expect(!everything.contains(secret), "find printed \(secret)")
        }
    }
}

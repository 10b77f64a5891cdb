import App
import AsyncHTTPClient
import Console
import Engine
import Foundation
import Gamebase
import GamebaseSimulator
import IAPTestSupport
import KafkaTesting
import NIOCore
import NIOHTTP1
import PostgresNIO
import Sandbox
import Testing

@testable import SystemTestSupport

/// The operator console as an on-call engineer uses it: the real worker (mock cluster, the simulator over HTTP, a
/// PostgreSQL ledger) over a mixed workload, its console driven by a real headless Chromium (Debian's, through
/// Selenium: scripts/console-browser-check.py), then every page and its JSON read for secrets.
@Suite("The operator console in a real browser", .serialized, .timeLimit(.minutes(6)))
struct ConsoleBrowserTests {
    static var root: URL { TestRepository.root }
    static let ledgerPassword = "Ledger-Pw-\(UUID().uuidString.prefix(8))"

    static var payments: [SimulatedPayment] {
        [
            EndToEndSystem.payment("g1", user: "u1"), EndToEndSystem.payment("st3", user: "u3"),
            EndToEndSystem.payment("dl4", user: "u4"),
        ]
    }

    /// The purchases' tokens and the refund's (Google's notification carries the purchase token).
    static let tokens = ["tok-g1", "tok-st3", "tok-dl4", "play-token-GPA.g1"]

    @Test func anOnCallEngineerFindsPurchasesByEveryIdAndADeadLetteredOnesTimelineInChromium() async throws {
        let faults = SimulatorFaults(
            unknownFieldRate: 0, tokenResultCodes: ["tok-dl4": GamebaseResultCode.unknownError.rawValue])
        try await EndToEndSystem.run(.postgres, payments: Self.payments, faults: faults) { system in
            var configuration = system.configuration()
            // A ledger user whose password the pages must never show.
            configuration.ledgerURL = try await Self.ledgerWithOwnPassword(system.ledgerURL)
            let port = try freeLoopbackPort()
            configuration.console = ConsoleConfiguration(port: port, environment: "production", showPayloads: true)
            // Every ask of the sweep below answered, none refused for coming too soon after the last.
            configuration.console.gamebaseAskInterval = .zero
            configuration.reconcile.interval = .zero
            configuration.refunds.googlePackageName = GoogleNotifications.package
            let base = "http://127.0.0.1:\(port)"
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            do {
                try await walk(system, configuration, client, base)
                try await client.shutdown()
            } catch {
                try? await client.shutdown()
                throw error
            }
        }
    }

    func walk(_ system: EndToEndSystem, _ configuration: WorkerConfiguration, _ client: HTTPClient, _ base: String)
        async throws
    {
        try await system.withWorker(configuration) { parts in
            #expect(parts.console != nil)
            try await system.produce([(key: "thief", value: EndToEndSystem.message("st3", user: "thief"))])
            try await system.produce([
                (key: "u1", value: EndToEndSystem.message("g1", user: "u1")),
                (key: "u3", value: EndToEndSystem.message("st3", user: "u3")),
                (key: "u4", value: EndToEndSystem.message("dl4", user: "u4")),
                (key: "u6", value: #"{"userId":"u6","paymentSeq":"m6"}"#),
                (key: "u1", value: EndToEndSystem.message("g1", user: "u1")),
            ])
            try await system.eventually("every story is in the ledger", within: 60) {
                let g1 = try await Self.get(client, base + "/purchase?seq=g1", json: true)
                let st3 = try await Self.get(client, base + "/purchase?seq=st3", json: true)
                let dl4 = try await Self.get(client, base + "/purchase?seq=dl4", json: true)
                let m6 = try await Self.get(client, base + "/purchase?seq=m6", json: true)
                return g1.contains("granted and consumed") && g1.contains(#""duplicates_after":"1""#)
                    && st3.contains("granted and consumed") && st3.contains("user_mismatch")
                    && dl4.contains("gamebase_unavailable") && m6.contains("dead_letter")
            }

            // The store takes g1's money back, and refunds a payment this ledger never saw.
            try await system.produce(
                [("n", GoogleNotifications.voided("GPA.g1")), ("n", GoogleNotifications.voided("GPA.unseen"))],
                to: "store.notifications")
            try await system.eventually("the refunds are recorded", within: 60) {
                let refunds = try await Self.get(client, base + "/refunds", json: true)
                return refunds.contains(#""outcome":"revoked""#) && refunds.contains(#""outcome":"pending""#)
            }

            let shots = Self.root.appendingPathComponent(".build/console-screenshots")
            let (status, output) = try Self.browse(
                base, queries: ["g1", "GPA.g1", "u1", "GPA.unseen"], deadLettered: "dl4", refundingUser: "u1",
                shots: shots)
            #expect(status == 0, "\(output)")
            let report = try #require(
                try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "\(output)")
            #expect(report["error"] == nil, "\(report["error"] ?? "")")
            let pages = try #require(report["pages"] as? [[String: Any]])
            let text = Dictionary(
                pages.map { ($0["name"] as? String ?? "", $0["text"] as? String ?? "") }, uniquingKeysWith: { $1 })

            let overview = try #require(text["overview"])
            for words in [
                "PRODUCTION", "Overview", "READY (/READYZ)", "ready", "Purchases", "last 5 min", "last 60 min",
                "user_mismatch", "malformed_message", "gamebase_unavailable", "Consumer lag",
            ] {
                #expect(overview.contains(words), "overview: \(words)")
            }
            let g1 = try #require(text["search g1"])
            #expect(g1.contains("g1 is a paymentSeq: 1 purchase."))
            #expect(g1.contains("granted and consumed"))
            #expect(g1.contains("paymentId GPA.g1"))
            #expect(g1.contains("Ask Gamebase now"))
            #expect(try #require(text["search GPA.g1"]).contains("GPA.g1 is a store payment id: 1 purchase."))
            let u1 = try #require(text["search u1"])
            #expect(u1.contains("u1 is a userId: 1 purchase."))
            #expect(u1.contains("purchase g1"))
            #expect(g1.contains("revoked (refunded)"))
            let unseen = try #require(text["search GPA.unseen"])
            #expect(unseen.contains("refunded by the store; no purchase in the ledger (pending refund)"), "\(unseen)")
            let refunds = try #require(text["refunds"])
            for words in [
                "Per day", "Users with the most revoked grants in 30 days", "Latest refund notifications",
                "voidedPurchaseNotification", "revoked", "pending", "GPA.unseen", "no grant", "u1",
            ] {
                #expect(refunds.contains(words), "refunds: \(words)")
            }
            let refunder = try #require(text["refunding user"])
            #expect(refunder.contains("u1 is a userId: 1 purchase."))
            #expect(refunder.contains("revoked (refunded)"))
            let letters = try #require(text["dead letters"])
            #expect(letters.contains("gamebase_unavailable"))
            #expect(letters.contains("malformed_message"))
            #expect(letters.contains("iap-worker reprocess --reason gamebase_unavailable"))
            let timeline = try #require(text["dead-lettered timeline"])
            #expect(timeline.contains("purchase dl4"))
            #expect(timeline.contains("dead-lettered for gamebase_unavailable"))

            // Nothing from outside: every resource and every reference is the console's own.
            for page in pages {
                let resources = page["resources"] as? [String] ?? []
                #expect(resources.allSatisfy { $0.hasPrefix(base + "/") }, "\(page["name"] ?? ""): \(resources)")
                let references = page["references"] as? [String] ?? []
                #expect(references.allSatisfy { $0.hasPrefix("/") }, "\(page["name"] ?? ""): \(references)")
                for token in Self.tokens { #expect(!(page["text"] as? String ?? "").contains(token)) }
            }
            // The policy holds in the browser: an inline script put into the page does not run, an outside image
            // does not load, and the browser says why.
            let csp = try #require(report["csp"] as? [String: Any])
            #expect(csp["inlineRan"] as? Bool == false)
            let violations = csp["violations"] as? [String] ?? []
            #expect(violations.contains { $0.hasPrefix("script-src") }, "\(violations)")
            #expect(violations.contains("img-src"), "\(violations)")
            let said = csp["log"] as? [String] ?? []
            #expect(
                said.contains { $0.contains("violates the following Content Security Policy directive") }, "\(said)")
            let log = report["log"] as? [[String: Any]] ?? []
            #expect(log.filter { $0["level"] as? String == "SEVERE" }.isEmpty, "\(log)")

            // The dead-lettered record's value, read from the dead-letter topic: its token only as a hash.
            let lettersJSON = try await Self.get(client, base + "/dead-letters", json: true)
            let list = try #require(try JSONSerialization.jsonObject(with: Data(lettersJSON.utf8)) as? [String: Any])
            let dl4 = try #require(
                (list["letters"] as? [[String: Any]])?.first { $0["paymentSeq"] as? String == "dl4" })
            let address = try #require(dl4["deadLetterRecord"] as? String).split(separator: "/")
            let recordPage = "/dead-letters/record?partition=\(address[1])&offset=\(address[2])"
            let record = try await Self.get(client, base + recordPage, json: true)
            #expect(record.contains("purchaseToken"), "\(record)")
            #expect(record.contains("hidden, sha256"), "\(record)")
            #expect(record.contains("dl4"))
            try await Self.expectNoSecretInAnyPage(client, base, also: [recordPage])
        }
    }

    /// Every page, as HTML and as JSON, Gamebase asked included: no purchase token, no secret key, no ledger password.
    static func expectNoSecretInAnyPage(_ client: HTTPClient, _ base: String, also: [String]) async throws {
        let pages =
            also + [
                "/", "/search?q=g1", "/search?q=GPA.g1", "/search?q=u1", "/search?q=g1&gamebase=1", "/purchase?seq=st3",
                "/purchase?seq=st3&gamebase=1", "/purchase?seq=dl4", "/purchase?seq=dl4&gamebase=1", "/user?id=u3",
                "/user?id=u3&gamebase=1",
                "/user?id=thief", "/dead-letters", "/dead-letters?reason=gamebase_unavailable",
                "/search?q=purchase.completed%2F0%2F0%3Aconsume-failed", "/search?q=nothing-here", "/refunds",
                "/search?q=GPA.unseen",
            ]
        var checked = 0
        for page in pages {
            for json in [false, true] {
                // A record is read at most four times a second.
                if page.hasPrefix("/dead-letters/record") { try await Task.sleep(for: .milliseconds(300)) }
                let (status, body) = try await fetch(client, base + page, json: json)
                let form = json ? "JSON" : "HTML"
                for secret in tokens + [EndToEndSystem.secretKey, ledgerPassword] {
                    #expect(!body.contains(secret), "\(page) (\(form)) holds a secret")
                }
                // Swept as served: an answered page, Gamebase's answer in it where asked for.
                let found = page.contains("nothing-here") || page.contains("consume-failed") ? [200, 404] : [200]
                #expect(found.contains(status), "\(page) (\(form)): \(status)")
                if page.contains("gamebase=1") {
                    #expect(body.contains(json ? "\"checkedAt\"" : "Gamebase now"), "\(page) (\(form))")
                    #expect(!body.contains("another ask"), "\(page) (\(form))")
                }
                checked += 1
            }
        }
        #expect(checked == pages.count * 2)
    }

    static func get(_ client: HTTPClient, _ url: String, json: Bool) async throws -> String {
        try await fetch(client, url, json: json).body
    }

    static func fetch(_ client: HTTPClient, _ url: String, json: Bool) async throws -> (status: Int, body: String) {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: json ? "application/json" : "text/html")
        let response = try await client.execute(request, timeout: .seconds(30))
        return (Int(response.status.code), String(buffer: try await response.body.collect(upTo: 8 << 20)))
    }

    /// A database owned by a role of its own, with a password no other test uses.
    static func ledgerWithOwnPassword(_ url: String) async throws -> String {
        let server = try PostgresTestServer.current()
        let database = String(try #require(URLComponents(string: url)).path.dropFirst())
        let role = "console_\(UUID().uuidString.prefix(8).lowercased())"
        try await server.withConnection(to: database) { connection in
            for sql in [
                "CREATE ROLE \(role) LOGIN PASSWORD '\(ledgerPassword)'", "GRANT \(role) TO \(server.username)",
                "ALTER DATABASE \(database) OWNER TO \(role)",
            ] {
                _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: TestDatabases.quietLogger)
            }
        }
        var components = try #require(URLComponents(string: url))
        components.user = role
        components.password = ledgerPassword
        return try #require(components.string)
    }

    /// Runs the browser walk with the python of the project's checks (which installs Selenium on first use).
    static func browse(_ base: String, queries: [String], deadLettered: String, refundingUser: String, shots: URL)
        throws -> (Int32, String)
    {
        let python = try OutsideTools.run(
            "/bin/bash", [root.appendingPathComponent("scripts/check-venv.sh").path], stderr: false
        ).output.trimmingCharacters(in: .whitespacesAndNewlines)
        var arguments = [root.appendingPathComponent("scripts/console-browser-check.py").path, "--url", base]
        for query in queries { arguments += ["--query", query] }
        arguments += ["--dead-lettered", deadLettered, "--refunding-user", refundingUser, "--screenshots", shots.path]
        return try OutsideTools.run(python, arguments, stderr: false)
    }
}

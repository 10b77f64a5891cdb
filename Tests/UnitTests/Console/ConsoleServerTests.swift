import AsyncHTTPClient
import Console
import Foundation
import Fulfilment
import Logging
import Lookup
import NIOHTTP1
import ServiceLifecycle
import Testing

@Suite("The console's listener: read-only, closed without its token, safe headers, never hung by the ledger")
struct ConsoleServerTests {
    static let token = "console-token-0123456789abcdef"
    static let pages = [
        "/", "/search?q=\(FakeReader.seq.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)",
        "/purchase?seq=seq-%3Cb%3E1%3C%2Fb%3E",
        "/user?id=\(FakeReader.user.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)",
        "/dead-letters", "/dead-letters?reason=gamebase_unavailable", "/console.css", "/nope",
    ]

    @Test func withATokenRequestsWithoutItOrWithAWrongOneGet401AndNoPurchaseData() async throws {
        try await withConsole(access: ConsoleAccess(token: Self.token)) { base, client in
            let wrong: [[(String, String)]] = [
                [], [("Authorization", "Bearer wrong-token-0123456789abcdef")],
                [("Authorization", "Bearer \(Self.token)x")], [("Authorization", "Bearer \(Self.token.dropLast())")],
                [("Authorization", "Basic \(Data("admin:nope".utf8).base64EncodedString())")],
                [("Authorization", "Token \(Self.token)")], [("Authorization", "Bearer")],
                [("Authorization", "Bearer " + String(repeating: "a", count: 9_000))],
            ]
            for page in Self.pages {
                for headers in wrong {
                    for accept in ["text/html", "application/json"] {
                        let reply = try await request(client, base + page, headers: headers + [("Accept", accept)])
                        #expect(reply.status == 401, "\(page) \(headers.map(\.0))")
                        #expect(!reply.body.contains("seq-"), "\(page)")
                        #expect(!reply.body.contains("user-"), "\(page)")
                        #expect(!reply.body.contains("gamebase_unavailable"), "\(page)")
                        #expect(!reply.body.contains("purchase.completed"), "\(page)")
                        #expect(reply.headers["www-authenticate"]?.hasPrefix("Basic realm=") == true)
                    }
                }
            }
            // The token as a bearer, and as the password of Basic authentication (what a browser sends).
            let bearer = try await request(
                client, base + "/dead-letters", headers: [("Authorization", "Bearer \(Self.token)")])
            #expect(bearer.status == 200)
            #expect(bearer.body.contains("gamebase_unavailable"))
            let basic = try await request(
                client, base + "/dead-letters",
                headers: [("Authorization", "Basic \(Data("support:\(Self.token)".utf8).base64EncodedString())")])
            #expect(basic.status == 200)
            // An open loopback check does not apply behind a token: a proxy's Host is fine.
            let proxied = try await request(
                client, base + "/", headers: [("Authorization", "Bearer \(Self.token)"), ("Host", "console.example")])
            #expect(proxied.status == 200)
        }
    }

    @Test func everyWriteMethodGets405() async throws {
        try await withConsole { base, client in
            for page in Self.pages {
                for method in [HTTPMethod.POST, .PUT, .DELETE, .PATCH, .OPTIONS, .TRACE] {
                    let reply = try await request(client, base + page, method: method)
                    #expect(reply.status == 405, "\(method) \(page)")
                    #expect(reply.headers["allow"] == "GET, HEAD")
                    #expect(!reply.body.contains("seq-"))
                }
            }
        }
        // Before the token too: nothing is written whoever asks.
        try await withConsole(access: ConsoleAccess(token: Self.token)) { base, client in
            let reply = try await request(client, base + "/", method: .POST)
            #expect(reply.status == 405)
        }
    }

    @Test func everyResponseCarriesTheSecurityHeadersErrorsIncluded() async throws {
        try await withConsole(access: ConsoleAccess(token: Self.token)) { base, client in
            let auth = [("Authorization", "Bearer \(Self.token)")]
            var replies: [Reply] = []
            replies.append(try await request(client, base + "/", headers: auth))
            replies.append(try await request(client, base + "/nope", headers: auth))
            replies.append(try await request(client, base + "/search?q=", headers: auth))
            replies.append(try await request(client, base + "/"))
            replies.append(try await request(client, base + "/", method: .DELETE))
            replies.append(try await request(client, base + "/console.css", headers: auth))
            #expect(replies.map(\.status) == [200, 404, 200, 401, 405, 200])
            for reply in replies {
                let policy = try #require(reply.headers["content-security-policy"])
                #expect(policy.contains("default-src 'none'"))
                #expect(!policy.contains("script-src"))
                #expect(policy.contains("frame-ancestors 'none'"))
                #expect(reply.headers["x-frame-options"] == "DENY")
                #expect(reply.headers["referrer-policy"] == "no-referrer")
                #expect(reply.headers["x-content-type-options"] == "nosniff")
                #expect(reply.headers["cache-control"] == "no-store")
            }
        }
    }

    @Test func anOpenLoopbackConsoleRefusesRequestsAddressedToAnotherHost() async throws {
        // A web page whose name is rebound to 127.0.0.1 sends its own name as Host.
        try await withConsole { base, client in
            for host in ["attacker.example", "attacker.example:8081", "127.0.0.1.attacker.example", "10.0.0.1"] {
                let reply = try await request(client, base + "/dead-letters", headers: [("Host", host)])
                #expect(reply.status == 403, "\(host)")
                #expect(!reply.body.contains("gamebase_unavailable"))
            }
            for host in ["localhost:8081", "127.0.0.1", "[::1]:8081", "LOCALHOST"] {
                #expect(try await request(client, base + "/", headers: [("Host", host)]).status == 200, "\(host)")
            }
        }
    }

    @Test func hostileIdsAreShownEscapedNeverAsMarkup() async throws {
        try await withConsole { base, client in
            let user = FakeReader.user.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let page = try await request(client, base + "/user?id=\(user)")
            #expect(page.status == 200)
            #expect(page.body.contains("seq-&lt;b&gt;1&lt;/b&gt;"))
            #expect(!page.body.contains("<b>1</b>"))
            // The bidi override that would make the id read backwards is shown as an escape.
            #expect(page.body.contains("user-\\u{202e}evil"))
            #expect(!page.body.contains("\u{202E}"))
            let search = try await request(client, base + "/search?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E")
            #expect(search.status == 404)
            #expect(search.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
            #expect(!search.body.contains("<script>"))
            // An id longer than find takes is refused, not looked up.
            let long = try await request(client, base + "/search?q=\(String(repeating: "x", count: 1_025))")
            #expect(long.status == 400)
        }
    }

    @Test func noPageShowsAPurchaseToken() async throws {
        try await withConsole { base, client in
            for page in Self.pages {
                for accept in ["text/html", "application/json"] {
                    let reply = try await request(client, base + page, headers: [("Accept", accept)])
                    #expect(!reply.body.contains(FakeReader.token), "\(page)")
                }
            }
        }
    }

    @Test func aHungLedgerMakesPagesSaySoWithinTheirDeadline() async throws {
        try await withConsole(reader: FakeReader(hangs: true), ledgerTimeout: .seconds(1)) { base, client in
            let started = ContinuousClock.now
            let search = try await request(
                client, base + "/search?q=anything", headers: [("Accept", "application/json")])
            #expect(search.status == 503)
            #expect(search.body.contains("did not finish within"))
            let overview = try await request(client, base + "/")
            #expect(overview.status == 200)
            #expect(overview.body.contains("The ledger did not say"))
            // The worker's own status still shows, the revoked grants whose Consume was set aside among it.
            #expect(overview.body.contains("In flight"))
            #expect(overview.body.contains("Consume set aside") && overview.body.contains("2 revoked grants"))
            let letters = try await request(client, base + "/dead-letters")
            #expect(letters.status == 503)
            #expect(ContinuousClock.now - started < .seconds(8))
        }
    }

    @Test func theRefundsPageShowsTheDaysTheUsersAndTheLatestEscapedAndLinked() async throws {
        try await withConsole { base, client in
            let page = try await request(client, base + "/refunds")
            #expect(page.status == 200)
            let html = page.body
            #expect(html.contains("aria-current=\"page\">Refunds</a>"))
            // What the store and the users said is shown as text, never as markup.
            for markup in ["<i>voided</i>", "<script>gems</script>", "<b>revoked</b>", "<u>never</u>"] {
                #expect(!html.contains(markup), "\(markup)")
            }
            #expect(html.contains("&lt;i&gt;voided&lt;/i&gt;"))
            // The revoked refund links to its purchase and its user; the pending one to its payment.
            #expect(html.contains("href=\"/purchase?seq=seq-%3Cb%3E1%3C%2Fb%3E\""))
            #expect(html.contains("href=\"/user?id=user-%E2%80%AEevil\""))
            #expect(html.contains("href=\"/search?q=GPA.%3Cu%3Enever%3C%2Fu%3E\""))
            #expect(html.contains("no grant"))

            let json = try await request(client, base + "/refunds", headers: [("Accept", "application/json")])
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.body.utf8)) as? [String: Any])
            let days = try #require(object["days"] as? [[String: Any]])
            #expect(days.count == 30)
            // Today first: its counts; the count older than 30 days is on no day.
            #expect(days.first?["revoked"] as? Int == 3 && days.first?["pending"] as? Int == 1)
            #expect(days.first?["total"] as? Int == 4)
            #expect(days.reduce(0) { $0 + ($1["total"] as? Int ?? 0) } == 4)
            let users = try #require(object["users"] as? [[String: Any]])
            #expect(users.first?["userId"] as? String == FakeReader.user && users.first?["reversed"] as? Int == 1)
            #expect((object["latest"] as? [[String: Any]])?.count == 2)
            // Refused records: why and where each last came from, escaped; one an older version kept without it.
            let refused = try #require(object["refused"] as? [[String: Any]])
            #expect(refused.first?["source"] as? String == "store.notifications[2]@<i>41</i>")
            #expect(refused.first?["count"] as? Int == 3 && refused.first?["code"] as? String == "signed_in_the_future")
            #expect(html.contains("store.notifications[2]@&lt;i&gt;41&lt;/i&gt;"))
            #expect(html.contains("&lt;b&gt;signed&lt;/b&gt; 10 minutes ahead"))
            #expect(html.contains("not kept (an older version refused it)"))

            // The console's search finds a refund by its notification id, as `find` does.
            let found = try await request(client, base + "/search?q=n-pending")
            #expect(found.status == 200)
            #expect(found.body.contains("GPA.&lt;u&gt;never&lt;/u&gt;"))
            #expect(found.body.contains("no purchase in the ledger (pending refund)"), "\(found.body)")
        }
    }

    @Test func aHungLedgerMakesTheRefundsPageSaySoWithinItsDeadline() async throws {
        try await withConsole(ledgerTimeout: .seconds(1), refunds: FakeRefunds(hangs: true)) { base, client in
            let started = ContinuousClock.now
            let page = try await request(client, base + "/refunds")
            #expect(page.status == 503)
            #expect(page.body.contains("The ledger did not say"))
            #expect(ContinuousClock.now - started < .seconds(8))
        }
    }

    @Test func everyPageIsAlsoJSONWhenAskedFor() async throws {
        try await withConsole { base, client in
            let overview = try await request(client, base + "/", headers: [("Accept", "application/json")])
            #expect(overview.headers["content-type"] == "application/json")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(overview.body.utf8)) as? [String: Any])
            #expect(object["environment"] as? String == "production")
            let windows = try #require(object["windows"] as? [[String: Any]])
            #expect(windows.map { $0["minutes"] as? Int } == [5, 60])
            let user = FakeReader.user.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let found = try await request(client, base + "/user?id=\(user)", headers: [("Accept", "application/json")])
            let result = try #require(try JSONSerialization.jsonObject(with: Data(found.body.utf8)) as? [String: Any])
            #expect(result["kind"] as? String == "user_id")
            #expect((result["purchases"] as? [Any])?.count == 1)
            let letters = try await request(client, base + "/dead-letters", headers: [("Accept", "application/json")])
            let list = try #require(try JSONSerialization.jsonObject(with: Data(letters.body.utf8)) as? [String: Any])
            let first = try #require((list["letters"] as? [[String: Any]])?.first)
            #expect(first["reprocessCommand"] as? String == "iap-worker reprocess --reason gamebase_unavailable")
            #expect(first["tokenHash"] as? String == "abcdef012345")
            // A browser's Accept gets HTML.
            let html = try await request(
                client, base + "/",
                headers: [("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")])
            #expect(html.headers["content-type"] == "text/html; charset=utf-8")
            #expect(html.body.contains("PRODUCTION"))
        }
    }

    @Test func aHungLedgerHoldsAtMostFourReadsAndTheRestAreToldTheConsoleIsBusy() async throws {
        let started = ReadCounter()
        try await withConsole(reader: FakeReader(hangs: true, started: started), ledgerTimeout: .milliseconds(300)) {
            base, client in
            var bodies: [String] = []
            for index in 0..<7 {
                let reply = try await request(
                    client, base + "/purchase?seq=s\(index)", headers: [("Accept", "application/json")])
                #expect(reply.status == 503)
                bodies.append(reply.body)
            }
            // The reads that timed out still run (a stuck driver ignores cancellation) and still hold their slots.
            #expect(started.value == 4)
            #expect(bodies.prefix(4).allSatisfy { $0.contains("did not finish within") })
            #expect(bodies.suffix(3).allSatisfy { $0.contains("as many ledger reads as it makes at once") })
        }
    }

    @Test func headIsAnsweredAsGetWithoutABody() async throws {
        try await withConsole { base, client in
            let reply = try await request(client, base + "/", method: .HEAD)
            #expect(reply.status == 200)
            #expect(reply.body.isEmpty)
            #expect(reply.headers["content-security-policy"] != nil)
        }
    }

    @Test func askingGamebaseEndsWithinItsDeadlineOneAskAtATimeAndNeverFromAnotherSite() async throws {
        let gamebase = SilentGamebase()
        try await withConsole(gamebase: gamebase, gamebaseTimeout: .seconds(1)) { base, client in
            let seq = "seq-%3Cb%3E1%3C%2Fb%3E"
            // Another site's page cannot make a browser ask: the page is served, Gamebase is not called.
            let crossSite = try await request(
                client, base + "/purchase?seq=\(seq)&gamebase=1", headers: [("Sec-Fetch-Site", "cross-site")])
            #expect(crossSite.status == 200)
            #expect(gamebase.calls.value == 0)

            let started = ContinuousClock.now
            let asked = try await request(client, base + "/purchase?seq=\(seq)&gamebase=1")
            #expect(ContinuousClock.now - started < .seconds(5))
            #expect(asked.body.contains("Gamebase could not be asked"))
            #expect(asked.body.contains("did not finish within"))
            #expect(gamebase.calls.value == 1)
            // The first ask still waits on Gamebase: a second is refused, not stacked.
            let again = try await request(
                client, base + "/purchase?seq=\(seq)&gamebase=1", headers: [("Sec-Fetch-Site", "same-origin")])
            #expect(again.body.contains("another ask of Gamebase is running"))
            #expect(gamebase.calls.value == 1)
        }
    }

    @Test func aConsoleWhosePortIsTakenLeavesTheProcessRunningWithoutIt() async throws {
        try await withConsole { base, client in
            let port = try #require(Int(base.split(separator: ":").last ?? ""))
            var logger = Logger(label: "console-test")
            logger.logLevel = .critical
            let second = ConsoleServer(
                configuration: ConsoleConfiguration(port: port), reader: FakeReader(), gamebase: nil,
                status: FakeStatus(), logger: logger)
            let group = ServiceGroup(services: [second], logger: logger)
            let ended = ReadCounter()
            let running = Task {
                defer { ended.add() }
                try await group.run()
            }
            try await Task.sleep(for: .seconds(1))
            // It could not listen, and waits for the shutdown like any service instead of ending the group.
            #expect(second.listeningPort == nil)
            #expect(ended.value == 0)
            await group.triggerGracefulShutdown()
            try await running.value
            #expect(try await request(client, base + "/").status == 200)
        }
    }

    /// `before=` takes the cursor the "Older" links give — a time and the last row's id after the first `/` (a
    /// paymentSeq may hold `/` itself) — and a plain time; anything else is a 400 in the problem's shape.
    @Test func pagesTakeTheirCursorAndRefuseABadOne() async throws {
        try await withConsole { base, client in
            let user = FakeReader.user.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let time = "2030-01-01T00%3A00%3A00.000Z"
            for good in [
                "/user?id=\(user)&before=\(time)", "/user?id=\(user)&before=\(time)%2Fseq%2Fwith%2Fslashes",
                "/search?q=\(user)&before=\(time)%2Fs1", "/dead-letters?before=\(time)",
                "/dead-letters?reason=gamebase_unavailable&before=\(time)%2F12",
            ] {
                let reply = try await request(client, base + good, headers: [("Accept", "application/json")])
                #expect(reply.status == 200, "\(good): \(reply.body)")
            }
            for bad in [
                "/user?id=\(user)&before=yesterday", "/user?id=\(user)&before=\(time)%2F",
                "/user?id=\(user)&before=%2Fs1", "/user?id=\(user)&before=\(time)junk%2Fs1",
                "/dead-letters?before=\(time)%2Fx", "/dead-letters?before=\(time)%2F",
                "/dead-letters?before=\(time)%2F-1", "/dead-letters?before=12",
                // Finer than the ledger's milliseconds, a NUL no ledger can compare, an id longer than any handed out.
                "/user?id=\(user)&before=2030-01-01T00%3A00%3A00.0004Z",
                "/user?id=\(user)&before=\(time)%2Fs%001",
                "/user?id=\(user)&before=\(time)%2F\(String(repeating: "s", count: 1_025))",
            ] {
                let reply = try await request(client, base + bad, headers: [("Accept", "application/json")])
                #expect(reply.status == 400, "\(bad)")
                #expect(reply.body.contains("\"error\":\"before must be"), "\(bad): \(reply.body)")
            }
        }
    }

    /// The dead letters page's next page is the last one's cursor — its time and ledger row id — in its JSON and in
    /// its "Older" link, so the rest of its millisecond is on the next page.
    @Test func theDeadLettersNextPageCarriesTheLastOnesCursor() async throws {
        try await withConsole(reader: FakeReader(deadLetters: 60)) { base, client in
            let json = try await request(client, base + "/dead-letters", headers: [("Accept", "application/json")])
            let list = try #require(try JSONSerialization.jsonObject(with: Data(json.body.utf8)) as? [String: Any])
            let letters = try #require(list["letters"] as? [[String: Any]])
            #expect(letters.count == 50)
            let time = try #require(letters.last?["failedAt"] as? String)
            #expect(list["nextBefore"] as? String == "\(time)/951")
            // The fake reads its time anew at each read: the link's time is this page's.
            let html = try await request(client, base + "/dead-letters?reason=gamebase_unavailable")
            let link = try #require(
                html.body.firstRange(of: "href=\"/dead-letters?reason=gamebase_unavailable&amp;before="))
            let cursor = html.body[link.upperBound...].prefix { $0 != "\"" }
            #expect(cursor.hasSuffix("Z%2F951"), "\(cursor)")
            #expect(cursor.removingPercentEncoding.flatMap(CursorText.deadLetter)?.ledgerID == 951)
        }
    }

    @Test func askingGamebaseFromALaterPageAsksAboutThatPage() async throws {
        try await withConsole { base, client in
            let user = FakeReader.user.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let page = try await request(client, base + "/user?id=\(user)&before=2030-01-01T00:00:00.000Z")
            #expect(page.body.contains("&amp;before=2030-01-01T00%3A00%3A00.000Z&amp;gamebase=1"))
        }
    }
}

import AsyncHTTPClient
import Console
import Foundation
import NIOHTTP1
import Testing

@Suite("A dead-lettered record's value: only with console.show_payloads, tokens never")
struct ConsolePayloadTests {
    static let record = Array(
        #"{"userId":"u<script>","paymentSeq":"s1","purchaseToken":"tok-SECRET-purchase-token-1","extra":{"accessToken":"tok-2","note":"x"}}"#
            .utf8)

    @Test func withoutShowPayloadsTheValueIsNeverServedAndNotLinked() async throws {
        try await withConsole { base, client in
            let record = try await request(client, base + "/dead-letters/record?partition=0&offset=7")
            #expect(record.status == 404)
            #expect(record.body.contains("console.show_payloads: true"))
            let letters = try await request(client, base + "/dead-letters")
            #expect(!letters.body.contains("/dead-letters/record"))
            #expect(letters.body.contains("321 bytes"))
        }
    }

    @Test func withShowPayloadsTheValueIsShownWithEveryTokenHashedAndMarkupEscaped() async throws {
        try await withConsole(records: FakeRecords(value: Self.record)) { base, client in
            let letters = try await request(client, base + "/dead-letters")
            #expect(letters.body.contains("/dead-letters/record?partition=0&amp;offset=7"))
            for accept in ["text/html", "application/json"] {
                let page = try await request(
                    client, base + "/dead-letters/record?partition=0&offset=7", headers: [("Accept", accept)])
                #expect(page.status == 200)
                #expect(!page.body.contains("tok-SECRET-purchase-token-1"))
                #expect(!page.body.contains("tok-2"))
                #expect(page.body.contains("hidden, sha256"))
                #expect(page.body.contains("s1"))
                // Markup only matters in HTML; JSON carries the value as data (served as application/json, nosniff).
                if accept == "text/html" { #expect(!page.body.contains("u<script>")) }
            }
            let gone = try await request(client, base + "/dead-letters/record?partition=0&offset=8")
            #expect(gone.status == 404)
            for bad in ["partition=-1&offset=7", "partition=0", "partition=x&offset=7", "offset=99999999999999999999"] {
                #expect(try await request(client, base + "/dead-letters/record?\(bad)").status == 400, "\(bad)")
            }
        }
    }

    @Test func aValueThatIsNoJSONIsShownEscapedWithItsTokensStillMasked() async throws {
        let broken = Array(#"{"purchaseToken": "tok-SECRET-purchase-token-1", "userId": "u1" \u{202E} <b>"#.utf8)
        try await withConsole(records: FakeRecords(value: broken)) { base, client in
            let page = try await request(client, base + "/dead-letters/record?partition=0&offset=7")
            #expect(page.status == 200)
            #expect(!page.body.contains("tok-SECRET-purchase-token-1"))
            #expect(page.body.contains("not JSON"))
            #expect(page.body.contains("&lt;b&gt;"))
            #expect(!page.body.contains("\u{202E}"))
        }
    }
}

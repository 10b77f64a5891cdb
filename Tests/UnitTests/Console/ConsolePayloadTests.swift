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
                try await Task.sleep(for: .milliseconds(300))  // one record read each 250 ms
                let page = try await request(
                    client, base + "/dead-letters/record?partition=0&offset=7", headers: [("Accept", accept)])
                #expect(page.status == 200)
                #expect(!page.body.contains("tok-SECRET-purchase-token-1"))
                #expect(!page.body.contains("tok-2"))
                #expect(page.body.contains("hidden, sha256"))
                #expect(page.body.contains("s1"))
                // Markup only matters in HTML; JSON carries the value as data (served as application/json, nosniff).
                if accept == "text/html" {
                    #expect(!page.body.contains("u<script>"))
                    // Pretty-printed, one member a line, as it reads.
                    #expect(page.body.contains("\n  &quot;paymentSeq&quot; : &quot;s1&quot;,\n"))
                }
            }
            try await Task.sleep(for: .milliseconds(300))
            let gone = try await request(client, base + "/dead-letters/record?partition=0&offset=8")
            #expect(gone.status == 404)
            for bad in [
                "partition=-1&offset=7", "partition=0", "partition=x&offset=7",
                "partition=0&offset=99999999999999999999",
                "partition=2147483648&offset=7", "partition=0&offset=-1",
            ] {
                #expect(try await request(client, base + "/dead-letters/record?\(bad)").status == 400, "\(bad)")
            }
        }
    }

    /// The value of the record the fake topic holds, as the console shows it.
    static func shown(_ value: String, accept: String = "text/html") async throws -> Reply {
        try await withConsole(records: FakeRecords(value: Array(value.utf8))) { base, client in
            try await request(client, base + "/dead-letters/record?partition=0&offset=7", headers: [("Accept", accept)])
        }
    }

    @Test func aValueThatIsNoJSONButNamesATokenIsWithheldWhole() async throws {
        let token = "tok-SECRET-purchase-token-1"
        for value in [
            #"{"purchaseToken": "\#(token)", "userId": "u1" <b>"#, #"{'purchaseToken': '\#(token)'}"#,
            "purchaseToken=\(token)&userId=u1", #"{"purchase\u0054oken":"\#(token)"} junk"#,
            #"{"purchaseToken": 12345678901234 "#, #"Authorization: Bearer \#(token)"#,
        ] {
            let page = try await Self.shown(value)
            #expect(page.status == 200)
            #expect(!page.body.contains(token), "\(value)")
            #expect(!page.body.contains("12345678901234"), "\(value)")
            #expect(page.body.contains("not shown"), "\(value)")
        }
        // Text that names no such field is shown, escaped.
        let plain = try await Self.shown("not json \u{202E} <b>bold</b>")
        #expect(plain.body.contains("not JSON"))
        #expect(plain.body.contains("&lt;b&gt;bold&lt;/b&gt;"))
        #expect(!plain.body.contains("\u{202E}"))
    }

    @Test func tokensInsideStringsAndOfAnyTypeAreHiddenAndSecretsAreNotEvenHashed() async throws {
        let token = "tok-SECRET-purchase-token-1"
        let receipt = #"{\"purchaseToken\":\"\#(token)\",\"orderId\":\"GPA.1\"}"#
        let value =
            #"{"paymentSeq":"s1","payload":"\#(receipt)","note":"my token is \#(token)","#
            + #""items":[{"accessToken":987654321012}],"secretKey":"hunter2-hunter2","password":"hunter2"}"#
        for accept in ["text/html", "application/json"] {
            let page = try await Self.shown(value, accept: accept)
            #expect(!page.body.contains(token), "\(accept)")
            #expect(!page.body.contains("hunter2"), "\(accept)")
            #expect(!page.body.contains("987654321012"), "\(accept)")
            #expect(page.body.contains("GPA.1"), "\(accept): JSON inside a string is masked, not dropped")
            #expect(page.body.contains("withheld"), "\(accept): a string naming a token that is no JSON")
        }
    }

    @Test func aLongValueIsCutOnACharacterBoundaryAndSaysSo() async throws {
        let value = #"{"productName":""# + String(repeating: "보석", count: 6_000) + #""}"#
        let page = try await Self.shown(value, accept: "application/json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(page.body.utf8)) as? [String: Any])
        #expect(object["truncated"] as? Bool == true)
        let shown = try #require(object["value"] as? String)
        #expect(shown.utf8.count <= 16_384)
        #expect(!shown.contains("\u{FFFD}"))
    }

    @Test func aRecordIsNeverOpenedFromAnotherSitesPage() async throws {
        try await withConsole(records: FakeRecords(value: Self.record)) { base, client in
            let reply = try await request(
                client, base + "/dead-letters/record?partition=0&offset=7", headers: [("Sec-Fetch-Site", "cross-site")])
            #expect(reply.status == 403)
            #expect(!reply.body.contains("s1"))
        }
    }
}

import AsyncHTTPClient
import Foundation
import Gamebase
import GamebaseSimulator
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Testing
import Wire

/// The simulator against the contract's §12 checklist, with raw HTTP requests.
@Suite("Gamebase simulator conformance", .timeLimit(.minutes(1)))
struct SimulatorConformanceTests {
    typealias Support = GamebaseTestSupport

    struct Answer {
        var status: Int
        var transactionHeader: String?
        var json: [String: Any]?
        var header: [String: Any]? { json?["header"] as? [String: Any] }
        var resultCode: Int? { header?["resultCode"] as? Int }
    }

    static func request(
        _ url: String, method: HTTPMethod = .GET, headers: [(String, String)]? = nil, body: String? = nil
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers ?? [("Content-Type", "application/json"), ("X-Secret-Key", Support.secretKey)] {
            request.headers.add(name: name, value: value)
        }
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(5))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return Answer(
            status: Int(response.status.code), transactionHeader: response.headers.first(name: "X-TCGB-Transaction-Id"),
            json: try? JSONSerialization.jsonObject(with: Data(buffer: bytes)) as? [String: Any])
    }

    static func path(_ url: String, _ rest: String, app: String = Support.appID) -> String {
        "\(url)/tcgb-inapp/v1.3/apps/\(app)/\(rest)"
    }

    @Test func everyOutcomeIsHTTP200WithTheEnvelope() async throws {
        try await Support.withSimulator(payments: [Support.payment("1")]) { _, url in
            struct Case {
                var target: String
                var method: HTTPMethod = .GET
                var headers: [(String, String)]? = nil
                var body: String? = nil
                var code: Int
            }
            let plain = [("Content-Type", "text/plain"), ("X-Secret-Key", Support.secretKey)]
            let noKey = [("Content-Type", "application/json")]
            let cases: [Case] = [
                Case(target: Self.path(url, "payment/transaction?accessToken=tok-1"), code: 0),
                Case(target: Self.path(url, "payment/transaction?accessToken=unknown"), code: 1100),
                Case(target: Self.path(url, "payment/transaction"), code: -4_000_002),
                Case(target: Self.path(url, "payment/transaction?accessToken=tok-1"), headers: noKey, code: -4_010_004),
                Case(target: Self.path(url, "payment/transaction?accessToken=tok-1", app: "other"), code: -4_010_001),
                Case(target: Self.path(url, "payment/transaction?accessToken=tok-1"), headers: plain, code: -4_060_001),
                Case(target: Self.path(url, "consume"), method: .POST, body: "{not json", code: -4_150_001),
                Case(target: Self.path(url, "consume"), method: .POST, body: #"{"paymentSeq":"1"}"#, code: -4_000_002),
                Case(
                    target: Self.path(url, "consume"), method: .POST, body: #"{"paymentSeq":1,"accessToken":"tok-1"}"#,
                    code: -4_000_001),
                Case(target: Self.path(url, "consumable"), method: .POST, body: "{}", code: -4_000_002),
                Case(target: Self.path(url, "no/such/api"), method: .POST, body: "{}", code: -4_040_202),
                Case(target: Self.path(url, "consume"), code: -4_040_202),
                Case(target: "\(url)/tcgb-gateway/v1.3/whatever", code: -4_040_202),
            ]
            for item in cases {
                let (target, method, headers, body, code) = (
                    item.target, item.method, item.headers, item.body, item.code
                )
                let answer = try await Self.request(target, method: method, headers: headers, body: body)
                #expect(answer.status == 200, "\(target)")
                #expect(answer.resultCode == code, "\(method) \(target)")
                #expect((answer.header?["isSuccessful"] as? Bool) == (code == 0))
                if code != 0 { #expect(answer.json?["result"] == nil) }
            }
        }
    }

    @Test func transactionIDIsEchoedOrGenerated() async throws {
        try await Support.withSimulator(payments: [Support.payment("1")]) { _, url in
            let target = Self.path(url, "payment/transaction?accessToken=tok-1")
            let echoed = try await Self.request(
                target,
                headers: [
                    ("Content-Type", "application/json"), ("X-Secret-Key", Support.secretKey),
                    ("X-TCGB-Transaction-Id", "my-id-1"),
                ])
            #expect(echoed.transactionHeader == "my-id-1")
            #expect(echoed.header?["transactionId"] as? String == "my-id-1")
            let generated = try await Self.request(target)
            let id = try #require(generated.transactionHeader)
            #expect(!id.isEmpty)
            #expect(generated.header?["transactionId"] as? String == id)

            func answered(to transactionID: String) async throws -> String? {
                try await Self.request(
                    target,
                    headers: [
                        ("Content-Type", "application/json"), ("X-Secret-Key", Support.secretKey),
                        ("X-TCGB-Transaction-Id", transactionID),
                    ]
                ).transactionHeader
            }
            let longest = "a-b_c.d:" + String(repeating: "7", count: 120)
            #expect(try await answered(to: longest) == longest, "128 characters of letters, digits and -_.: are echoed")
            for implausible in ["has spaces", "slash/es", "quote\"", longest + "8"] {
                let replaced = try #require(try await answered(to: implausible))
                #expect(
                    replaced != implausible && UUID(uuidString: replaced) != nil,
                    "\(implausible) is replaced by a fresh id")
            }
        }
    }

    @Test func adminEndpointsAddPaymentsAndCountCalls() async throws {
        try await Support.withSimulator { _, url in
            let added = try await Self.request(
                "\(url)/admin/payments", method: .POST,
                body:
                    #"[{"paymentSeq":"9","userId":"u","accessToken":"t9","productType":"CONSUMABLE","price":1.5,"consumed":false}]"#
            )
            #expect(added.json?["added"] as? Int == 1)
            let bad = try await Self.request("\(url)/admin/payments", method: .POST, body: #"[{"paymentSeq":"x"}]"#)
            #expect(bad.status == 400)
            _ = try await Self.request(Self.path(url, "payment/transaction?accessToken=t9"))
            _ = try await Self.request(
                Self.path(url, "consume"), method: .POST, body: #"{"paymentSeq":"9","accessToken":"t9"}"#)
            _ = try await Self.request(
                Self.path(url, "consume"), method: .POST, body: #"{"paymentSeq":"9","accessToken":"t9"}"#)
            let counters = try await Self.request("\(url)/admin/counters")
            #expect((counters.json?["calls"] as? [String: Int]) == ["payment_transaction": 1, "consume": 2])
            #expect((counters.json?["consumes"] as? [String: Int]) == ["9": 1])
            let faults = try await Self.request("\(url)/admin/faults", method: .POST, body: #"{"outage":true}"#)
            #expect(faults.json?["outage"] as? Bool == true)
        }
    }

    @Test func unknownResponseFieldsAppearWhenAsked() async throws {
        try await Support.withSimulator(payments: [Support.payment("1")], faults: SimulatorFaults(unknownFieldRate: 1))
        { _, url in
            let answer = try await Self.request(Self.path(url, "payment/transaction?accessToken=tok-1"))
            let result = try #require(answer.json?["result"] as? [String: Any])
            #expect(result["simulatorNote"] != nil)
            #expect(answer.header?["serverTimeMs"] != nil)
        }
    }
}

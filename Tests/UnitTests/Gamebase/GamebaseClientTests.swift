import Foundation
import Gamebase
import GamebaseHTTP
import GamebaseSimulator
import Logging
import Testing

@Suite("Gamebase client against the simulator over HTTP", .timeLimit(.minutes(1)))
struct GamebaseClientTests {
    typealias Support = GamebaseTestSupport

    @Test func paymentTransactionReturnsTheVerifiedPaymentWithADecimalPrice() async throws {
        let payments = [Support.payment("2024051310001234", user: "QXG774PMRZMWR3BR")]
        try await Support.withSimulator(payments: payments, faults: SimulatorFaults(unknownFieldRate: 1)) { _, url in
            let client = Support.client(url)
            defer { Task { try await client.shutdown() } }
            let transaction = try await client.paymentTransaction(
                accessToken: "tok-2024051310001234", transactionID: .init())
            #expect(transaction.paymentSeq == "2024051310001234")
            #expect(transaction.userId == "QXG774PMRZMWR3BR")
            #expect(transaction.price == Decimal(string: "2.29"))
            #expect(transaction.productType == "CONSUMABLE")
            #expect(transaction.gamebaseProductId == "gem_pack_100")
            #expect(transaction.isConsumable == true)
            #expect(transaction.isTestPurchase == false)
        }
    }

    @Test(arguments: ["a/b+c=", "tok+with/slashes==", "x%2Fy", "spaces and ünïcode", "-_.~"])
    func accessTokensSurviveURLEncoding(token: String) async throws {
        try await Support.withSimulator(payments: [Support.payment("1", token: token)]) { simulator, url in
            let client = Support.client(url)
            defer { Task { try await client.shutdown() } }
            let transaction = try await client.paymentTransaction(accessToken: token, transactionID: .init())
            #expect(transaction.accessToken == token)
            #expect(
                try await client.consume(paymentSeq: "1", accessToken: token, transactionID: .init())
                    != .alreadyConsumed)
            #expect(simulator.state.consumes["1"] == 1)
        }
    }

    @Test func unknownTokenIsAPermanentRejection() async throws {
        try await Support.withSimulator { _, url in
            let client = Support.client(url)
            defer { Task { try await client.shutdown() } }
            let error = await #expect(throws: GamebaseError.self) {
                try await client.paymentTransaction(accessToken: "forged", transactionID: .init())
            }
            #expect(error?.resultCode == .invalidParameter)
            #expect(error?.kind == .permanent)
        }
    }

    @Test func wrongSecretKeyOrAppIDIsAConfigurationFailure() async throws {
        try await Support.withSimulator(payments: [Support.payment("1")]) { _, url in
            let badKey = Support.client(url, secretKey: "wrong")
            let badApp = Support.client(url, appID: "other-app")
            defer {
                Task {
                    try await badKey.shutdown()
                    try await badApp.shutdown()
                }
            }
            let keyError = await #expect(throws: GamebaseError.self) {
                try await badKey.paymentTransaction(accessToken: "tok-1", transactionID: .init())
            }
            #expect(keyError?.resultCode == .invalidSecretKey)
            #expect(keyError?.kind == .configuration)
            let appError = await #expect(throws: GamebaseError.self) {
                try await badApp.consume(paymentSeq: "1", accessToken: "tok-1", transactionID: .init())
            }
            #expect(appError?.resultCode == .invalidAppID)
            #expect(appError?.kind == .configuration)
        }
    }

    @Test func consumeSucceedsOnceThenAnswersAlreadyConsumed() async throws {
        try await Support.withSimulator(payments: [Support.payment("7")]) { simulator, url in
            let client = Support.client(url)
            defer { Task { try await client.shutdown() } }
            let first = try await client.consume(paymentSeq: "7", accessToken: "tok-7", transactionID: .init())
            guard case .consumed(let result) = first else {
                Issue.record("expected consumed, got \(first)")
                return
            }
            #expect(result.gamebaseProductId == "gem_pack_100")
            #expect(result.price == Decimal(string: "2.29"))
            #expect(
                try await client.consume(paymentSeq: "7", accessToken: "tok-7", transactionID: .init())
                    == .alreadyConsumed)
            let after = try await client.paymentTransaction(accessToken: "tok-7", transactionID: .init())
            #expect(after.isConsumable == false)
            #expect(simulator.state.consumes["7"] == 1)
        }
    }

    @Test func consumingASubscriptionOrWithAMismatchedTokenIsRejected() async throws {
        let payments = [Support.payment("s", type: GamebaseProductType.autoRenewable), Support.payment("c")]
        try await Support.withSimulator(payments: payments) { simulator, url in
            let client = Support.client(url)
            defer { Task { try await client.shutdown() } }
            for (seq, token) in [("s", "tok-s"), ("c", "tok-s"), ("c", "nope")] {
                let error = await #expect(throws: GamebaseError.self) {
                    try await client.consume(paymentSeq: seq, accessToken: token, transactionID: .init())
                }
                #expect(error?.resultCode == .consumeFailed)
                #expect(error?.kind == .permanent)
            }
            #expect(simulator.state.consumes.isEmpty)
        }
    }

    @Test func listConsumablesFiltersByUserStoreTypeAndState() async throws {
        let payments = [
            Support.payment("1", user: "u", market: "GG"), Support.payment("2", user: "u", market: "AS"),
            Support.payment("3", user: "u", market: "AMAZON"), Support.payment("4", user: "u", consumed: true),
            Support.payment("5", user: "u", type: GamebaseProductType.autoRenewable),
            Support.payment("6", user: "u", type: GamebaseProductType.consumableAutoRenewable),
            Support.payment("7", user: "someone-else"),
        ]
        try await Support.withSimulator(payments: payments) { _, url in
            let client = Support.client(url)
            defer { Task { try await client.shutdown() } }
            let all = try await client.listConsumables(userId: "u", marketIds: nil, transactionID: .init())
            #expect(all.map(\.paymentSeq) == ["1", "2", "6"])
            let amazon = try await client.listConsumables(
                userId: "u", marketIds: ["AMAZON", "GG"], transactionID: .init())
            #expect(amazon.map(\.paymentSeq) == ["1", "3", "6"])
            let none = try await client.listConsumables(userId: "nobody", marketIds: [], transactionID: .init())
            #expect(none.isEmpty)
        }
    }

    @Test func aConsumeThatTimesOutIsFoundConsumedOnRetry() async throws {
        let faults = SimulatorFaults(slowConsumeRate: 1, slowConsumeDelayMs: 1_500, unknownFieldRate: 0)
        try await Support.withSimulator(payments: [Support.payment("slow")], faults: faults) { simulator, url in
            let client = Support.client(url, consumeTimeoutMilliseconds: 300)
            defer { Task { try await client.shutdown() } }
            let transactionID = GamebaseTransactionID()
            let error = await #expect(throws: GamebaseError.self) {
                try await client.consume(paymentSeq: "slow", accessToken: "tok-slow", transactionID: transactionID)
            }
            #expect(error?.code == .timeout)
            #expect(error?.isRetryable == true)
            // The consume applied although the answer never came; the retry learns it from 5018.
            let outcome = try await RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(10)).run { _ in
                try await client.consume(paymentSeq: "slow", accessToken: "tok-slow", transactionID: transactionID)
            }
            #expect(outcome == .alreadyConsumed)
            #expect(simulator.state.consumes["slow"] == 1)
        }
    }

    @Test func outageAnswersAreTransient() async throws {
        let faults = SimulatorFaults(unknownFieldRate: 0, outage: true)
        try await Support.withSimulator(payments: [Support.payment("1")], faults: faults) { _, url in
            let client = Support.client(url)
            defer { Task { try await client.shutdown() } }
            var codes: Set<String> = []
            for _ in 0..<40 {
                let error = await #expect(throws: GamebaseError.self) {
                    try await client.paymentTransaction(accessToken: "tok-1", transactionID: .init())
                }
                #expect(error?.kind == .transient)
                if let error { codes.insert(error.code == .resultCode ? "code \(error.resultCode!)" : "\(error.code)") }
            }
            // T-class result codes and proxy answers that are not JSON.
            #expect(codes.contains("http_status"))
            #expect(codes.contains { $0.hasPrefix("code") })
        }
    }

    @Test func connectionRefusedIsTransient() async throws {
        let client = Support.client("http://127.0.0.1:1", timeoutMilliseconds: 1_000)
        defer { Task { try await client.shutdown() } }
        let error = await #expect(throws: GamebaseError.self) {
            try await client.paymentTransaction(accessToken: "tok", transactionID: .init())
        }
        #expect(error?.code == .connection || error?.code == .timeout)
        #expect(error?.isRetryable == true)
    }

    /// The error of one Get Payment Transaction call to `server` (nil if it succeeded, which is recorded as a
    /// failure); closes the server.
    private func paymentTransactionFailure(from server: FixedAnswerServer) async throws -> GamebaseError? {
        let client = Support.client("http://127.0.0.1:\(server.port)")
        let error = await #expect(throws: GamebaseError.self) {
            try await client.paymentTransaction(accessToken: "tok", transactionID: .init())
        }
        try await client.shutdown()
        await server.close()
        return error
    }

    @Test func aBaseURLWithAPathPrefixesEveryCall() async throws {
        let answer =
            #"{"header":{"isSuccessful":true,"resultCode":0},"result":{"paymentSeq":"1","userId":"user-1","isConsumable":true}}"#
        let server = try await FixedAnswerServer(answer: FixedAnswerServer.ok(answer))
        let client = Support.client("http://127.0.0.1:\(server.port)/gateway/")
        _ = try await client.paymentTransaction(accessToken: "tok/1", transactionID: .init())
        try await client.shutdown()
        await server.close()
        #expect(
            server.requests.map(\.uri) == [
                "/gateway/tcgb-inapp/v1.3/apps/\(Support.appID)/payment/transaction?accessToken=tok%2F1"
            ])
    }

    @Test func aRedirectIsNotFollowedSoTheSecretKeyGoesNowhereElse() async throws {
        let server = try await FixedAnswerServer(
            answer: "HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n")
        let error = try await paymentTransactionFailure(from: server)
        #expect(error?.code == .httpStatus)
        #expect(error?.httpStatus == 302)
        #expect(server.requests.map(\.uri).allSatisfy { !$0.hasPrefix("/elsewhere") })
        #expect(server.requests.count == 1)
    }

    @Test(arguments: [
        "<html><body>502 Bad Gateway</body></html>", #"{"header":{"isSuccessful":true}}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0}"#,
        #"{"header":{"isSuccessful":true,"resultCode":0},"result":{"userId":"u"}}"#,
        // Fail closed: a payment that does not say whether it may be consumed is no answer, never a grant.
        #"{"header":{"isSuccessful":true,"resultCode":0},"result":{"paymentSeq":"1","userId":"u","productType":"CONSUMABLE"}}"#,
    ])
    func aSuccessfulStatusWithABodyThatIsNotTheEnvelopeIsATransientInvalidResponse(_ body: String) async throws {
        let error = try await paymentTransactionFailure(from: FixedAnswerServer(answer: FixedAnswerServer.ok(body)))
        #expect(error?.code == .invalidResponse)
        #expect(error?.isRetryable == true)
    }

    @Test func cancellingTheCallerEndsACallThatIsWaitingForItsAnswer() async throws {
        // The first request is never answered and the client would wait 50 s for it: only cancellation can end
        // the call within the suite's one-minute limit.
        let answer =
            #"{"header":{"isSuccessful":true,"resultCode":0},"result":{"paymentSeq":"1","userId":"user-1","isConsumable":true}}"#
        let server = try await FixedAnswerServer(answer: FixedAnswerServer.ok(answer), unanswered: 1)
        let client = Support.client("http://127.0.0.1:\(server.port)", timeoutMilliseconds: 50_000)
        let call = Task { try await client.paymentTransaction(accessToken: "tok-1", transactionID: .init()) }
        while server.requests.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        call.cancel()
        let error = await #expect(throws: GamebaseError.self) { try await call.value }
        #expect(error?.code == .connection)
        // The client still works: the cancelled call gave its place back, and the next call is answered.
        let payment = try await client.paymentTransaction(accessToken: "tok-1", transactionID: .init())
        #expect(payment.paymentSeq == "1")
        #expect(server.requests.count == 2)
        try await client.shutdown()
        await server.close()
    }

    @Test func aSlowAnswerTimesOut() async throws {
        try await Support.withSimulator(
            payments: [Support.payment("1")], faults: SimulatorFaults(latencyMs: 800, unknownFieldRate: 0)
        ) { _, url in
            let client = Support.client(url, timeoutMilliseconds: 200)
            defer { Task { try await client.shutdown() } }
            let error = await #expect(throws: GamebaseError.self) {
                try await client.paymentTransaction(accessToken: "tok-1", transactionID: .init())
            }
            #expect(error?.code == .timeout)
        }
    }

    @Test func secretKeyAndTokensNeverAppearInErrorsOrLogs() async throws {
        let token = "tok/SECRET+TOKEN=value"
        try await Support.withSimulator(
            payments: [Support.payment("1", token: token)], faults: SimulatorFaults(unknownFieldRate: 0)
        ) {
            simulator, url in
            let lines = CapturingLogHandler.Lines()
            let logger = Logger(label: "capture") { _ in CapturingLogHandler(sink: lines) }
            var descriptions: [String] = []
            // Consume times out (the simulator answers it after 800 ms); Get Payment Transaction has room to answer even
            // on a machine busy with the rest of the suite.
            let good = Support.client(url, timeoutMilliseconds: 5_000, consumeTimeoutMilliseconds: 300, logger: logger)
            let badKey = Support.client(url, secretKey: "wrong-\(Support.secretKey)", logger: logger)
            let down = Support.client("http://127.0.0.1:1", logger: logger)
            defer {
                Task {
                    try await good.shutdown()
                    try await badKey.shutdown()
                    try await down.shutdown()
                }
            }
            _ = try await good.paymentTransaction(accessToken: token, transactionID: .init())
            for client in [badKey, down] {
                do { _ = try await client.paymentTransaction(accessToken: token, transactionID: .init()) } catch {
                    descriptions.append("\(error)")
                    descriptions.append(String(reflecting: error))
                }
            }
            simulator.state.faults = SimulatorFaults(slowConsumeRate: 1, slowConsumeDelayMs: 800, unknownFieldRate: 0)
            do { _ = try await good.consume(paymentSeq: "1", accessToken: token, transactionID: .init()) } catch {
                descriptions.append("\(error)")
            }
            #expect(descriptions.count == 5)
            #expect("\(Secret(Support.secretKey))" == "<redacted>")
            for text in descriptions + lines.all {
                #expect(!text.contains(Support.secretKey), "\(text)")
                #expect(!text.contains("SECRET+TOKEN") && !text.contains("SECRET%2BTOKEN"), "\(text)")
            }
            #expect(!lines.all.isEmpty)
        }
    }
}

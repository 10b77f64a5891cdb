import IAPTestSupport
import Kafka
import Logging
import Synchronization
import Testing

/// A client that reaches its broker but cannot speak to it: which of librdkafka's words mean that, and how often the
/// worker says so.
@Suite("Brokers a client cannot speak to", .tags(.librdkafka))
struct KafkaBrokerProblemTests {
    @Test(
        arguments: [
            (
                "127.0.0.1:39094/bootstrap: ApiVersionRequest failed: Local: Read underflow: probably due to broker "
                    + "version < 0.10 (see api.version.request configuration) (after 0ms in state APIVERSION_QUERY)",
                KafkaBrokerProblem.Kind.unreadableAnswer
            ),
            (
                "b1:9092/1: SASL authentication error: Authentication failed during authentication due to invalid "
                    + "credentials with SASL mechanism SCRAM-SHA-256 (after 12ms in state AUTH_REQ)", .authentication
            ),
            ("b1:9093/1: SSL handshake failed: certificate verify failed (after 5ms in state SSL_HANDSHAKE)", .tls),
            ("b1:9092/2: Protocol parse failure for Metadata v12 (after 1ms in state UP)", .unreadableAnswer),
            (
                "b1:8080/bootstrap: Receive failed: Invalid response size 1213486160 (0..1000000000): increase "
                    + "receive.message.max.bytes (after 1ms in state APIVERSION_QUERY)", .unreadableAnswer
            ),
        ])
    func aBrokerReachedButNotUnderstoodIsRecognisedWithItsName(reason: String, kind: KafkaBrokerProblem.Kind) throws {
        let problem = try #require(KafkaBrokerProblem.recognise(reason, librdkafkaVersion: "2.0.2"))
        #expect(problem.kind == kind)
        #expect(problem.broker.hasPrefix("b1:") || problem.broker == "127.0.0.1:39094/bootstrap", "\(problem.broker)")
        #expect(problem.description.contains("librdkafka 2.0.2"))
        #expect(!problem.detail.hasPrefix("[thrd:"))
    }

    @Test(
        arguments: [
            "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)",
            "1/1 brokers are down",
            "nowhere:9092/bootstrap: Failed to resolve 'nowhere:9092': Name or service not known (after 2ms in state CONNECT)",
            "b1:9092/1: Connection setup timed out in state CONNECT (after 30029ms in state CONNECT)",
            "b1:9092/1: Disconnected (after 60001ms in state UP)",
            // librdkafka's guesses on a closed connection: a proxy with no backend or a restarting broker says this.
            "[thrd:b1:9093/bootstrap]: b1:9093/bootstrap: Disconnected while requesting ApiVersion: might be caused "
                + "by incorrect security.protocol configuration (connecting to a SSL listener?) or broker version "
                + "is < 0.10 (see api.version.request) (after 3ms in state APIVERSION_QUERY)",
            "b1:9092/bootstrap: Disconnected: verify that security.protocol is correctly configured, broker might "
                + "require SASL authentication (after 300ms in state UP)",
        ])
    func anUnreachableBrokerIsNoProblemOfThisKind(reason: String) {
        #expect(KafkaBrokerProblem.recognise(reason, librdkafkaVersion: "2.0.2") == nil)
    }

    @Test func whatABrokerSentCannotBreakTheLineOrGrowWithoutBound() throws {
        let hostile =
            "b1:9092/1: SASL authentication error: \u{1b}[2Jforged\nline\r" + String(repeating: "x", count: 8_192)
        let problem = try #require(KafkaBrokerProblem.recognise(hostile, librdkafkaVersion: "2.16.0"))
        #expect(!problem.description.unicodeScalars.contains { $0.properties.generalCategory == .control })
        #expect(problem.detail.count <= 300 && problem.description.count < 1_000)
        let longName = String(repeating: "h", count: 8_192) + ":9092/1: SASL authentication error: no"
        #expect(try #require(KafkaBrokerProblem.recognise(longName)).broker.count <= 200)
    }

    @Test func theLikelyCauseNamesTheFixThatFitsTheLoadedVersion() throws {
        let reason = "b:1/bootstrap: ApiVersionRequest failed: Local: Read underflow: probably due to broker version"
        let old = try #require(KafkaBrokerProblem.recognise(reason, librdkafkaVersion: "2.0.2"))
        #expect(old.likelyCause.contains("before 2.2.0") && old.likelyCause.contains("2.8 or later"))
        let current = try #require(KafkaBrokerProblem.recognise(reason, librdkafkaVersion: "2.16.0"))
        #expect(!current.likelyCause.contains("before 2.2.0"))
        // An HTTP port answers something unreadable too, but that is no handshake the client misread.
        let http = try #require(
            KafkaBrokerProblem.recognise(
                "b:80/bootstrap: Receive failed: Invalid response size 1213486160 (0..1000000000)",
                librdkafkaVersion: "2.0.2"))
        #expect(!http.likelyCause.contains("2.2.0") && http.likelyCause.contains("not HTTP"))
    }

    @Test func oneProblemIsLoggedAtMostOnceAMinuteAndForgottenWhenItStops() throws {
        let clock = Mutex<ContinuousClock.Instant>(.now)
        let reporter = BrokerProblemReporter(now: { clock.withLock { $0 } })
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let problem = try #require(
            KafkaBrokerProblem.recognise("b:1/bootstrap: ApiVersionRequest failed: Local: Read underflow"))
        let elsewhere = try #require(
            KafkaBrokerProblem.recognise("c:1/bootstrap: ApiVersionRequest failed: Local: Read underflow"))
        func advance(_ seconds: Int) { clock.withLock { $0 += .seconds(seconds) } }

        #expect(reporter.report(problem, logger: logger))
        advance(20)
        #expect(!reporter.report(problem, logger: logger), "20 s later: not again")
        #expect(reporter.report(elsewhere, logger: logger), "another broker is another line")
        advance(39)
        #expect(!reporter.report(problem, logger: logger), "59 s after the line: not again")
        advance(2)
        #expect(reporter.report(problem, logger: logger), "61 s after the line: again")
        #expect(reporter.current() == problem)
        advance(121)
        #expect(reporter.current() == nil, "not met for two minutes: gone")
    }

    @Test func theVersionDecisionsFollowTheLoadedLibrary() throws {
        // What rd_kafka_version() says is what rd_kafka_version_str() says.
        #expect(Librdkafka.Version(Librdkafka.versionString) == Librdkafka.version)
        #expect(Librdkafka.Version("2.16.0-RC2") == Librdkafka.Version(2, 16, 0))
        #expect(Librdkafka.Version("two") == nil && Librdkafka.Version("2.16") == nil)
        // Each decision at its release, on both sides of it.
        #expect(
            Librdkafka.Version(2, 2, 2).assignorStateBugApplies && !Librdkafka.Version(2, 3, 0).assignorStateBugApplies)
        #expect(Librdkafka.Version(2, 1, 9).misreadsTaggedFields && !Librdkafka.Version(2, 2, 0).misreadsTaggedFields)
        #expect(
            !Librdkafka.Version(2, 1, 1).knowsFetchQueueBackoff && Librdkafka.Version(2, 2, 0).knowsFetchQueueBackoff)
        #expect(
            !Librdkafka.Version(2, 3, 0).knowsConsumerGroupProtocol
                && Librdkafka.Version(2, 4, 0).knowsConsumerGroupProtocol)
        #expect(
            !Librdkafka.Version(2, 11, 9).consumerGroupProtocolIsGA
                && Librdkafka.Version(2, 12, 0).consumerGroupProtocolIsGA)
        #expect(Librdkafka.Version(2, 16, 0) > Librdkafka.Version(2, 9, 9), "compared as numbers, not as text")
    }
}

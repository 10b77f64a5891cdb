import App
import Foundation
import IAPTestSupport
import Kafka
import Logging
import Testing

/// A key nobody reads is refused, naming it, its file and line, and the key that was probably meant: a typo must not
/// leave a default in force while the file says otherwise.
@Suite(.tags(.librdkafka)) struct StrictConfigurationTests {
    static func load(_ yaml: String, environment: [String: String] = [:]) async throws -> WorkerConfiguration {
        try await WorkerConfiguration.load(configFile: try ConfigurationTests.file(yaml), environment: environment)
    }

    static func refusal(_ yaml: String, environment: [String: String] = [:]) async -> ConfigurationError? {
        do {
            _ = try await load(yaml, environment: environment)
            return nil
        } catch {
            return error as? ConfigurationError
        }
    }

    @Test(arguments: [
        ("worker:\n  max_inflight: 3\n", "worker.max_inflight", "worker.max_in_flight", 5),
        ("server:\n  prot: 8080\n", "server.prot", "server.port", 5),
        ("reconcile:\n  intervall_ms: 60000\n", "reconcile.intervall_ms", "reconcile.interval_ms", 5),
        ("legder:\n  url: sqlite:///tmp/x.sqlite\n", "legder", nil, 4),
    ])
    func aTypoedKeyIsRefusedWithItsLineAndTheNearestKey(tail: String, key: String, suggestion: String?, line: Int) async
    {
        let error = await Self.refusal(ConfigurationTests.minimal + "\n" + tail)
        #expect(error?.key == key)
        #expect(error?.problem.contains(":\(line))") == true, "\(error?.problem ?? "accepted")")
        if let suggestion {
            #expect(error?.problem.contains("did you mean \(suggestion)?") == true, "\(error?.problem ?? "accepted")")
        }
    }

    @Test func aTypoInsideAKnownSectionIsRefused() async {
        let error = await Self.refusal("gamebase:\n  app_id: app-1\n  secret_key: s\n  timout_ms: 3000\n")
        #expect(error?.key == "gamebase.timout_ms")
        #expect(
            error?.problem.contains(":4); did you mean gamebase.timeout_ms?") == true, "\(error?.problem ?? "accepted")"
        )
    }

    @Test func everyUnknownKeyOfTheFileIsNamed() async {
        let error = await Self.refusal(
            ConfigurationTests.minimal + "\nworker:\n  max_inflight: 3\n  retry:\n    max_attemps: 2\n")
        #expect(error?.key == "worker.max_inflight")
        #expect(error?.problem.contains("worker.retry.max_attemps (line 7)") == true, "\(error?.problem ?? "accepted")")
    }

    @Test func knownKeysAndAnyLibrdkafkaPropertyPass() async throws {
        let configuration = try await Self.load(
            ConfigurationTests.minimal
                + "\nworker:\n  max_in_flight: 3\n  retry:\n    max_attempts: 2\nkafka:\n  librdkafka:\n    session.timeout.ms: \"9000\"\n"
        )
        #expect(configuration.maxInFlight == 3)
        #expect(configuration.librdkafka["session.timeout.ms"] == "9000")
    }

    @Test func anUnknownLibrdkafkaPropertyIsRefusedWithLibrdkafkasMessage() async {
        let fromFile = await Self.refusal(
            ConfigurationTests.minimal + "\nkafka:\n  librdkafka:\n    sesion.timeout.ms: \"9000\"\n")
        #expect(fromFile?.key == "kafka.librdkafka.sesion.timeout.ms")
        #expect(
            fromFile?.problem.contains("No such configuration property") == true, "\(fromFile?.problem ?? "accepted")")
        let fromEnvironment = await Self.refusal(
            ConfigurationTests.minimal, environment: ["KAFKA_LIBRDKAFKA_FETCH_WAIT_MAX_MS": "abc"])
        #expect(fromEnvironment?.key == "kafka.librdkafka.fetch.wait.max.ms")
    }

    /// KIP-848's `group.protocol: consumer`: refused, in librdkafka's words, by a librdkafka that does not know it
    /// (before 2.4.0: Debian 12's 2.0.2); taken by one that does, and then the worker sets none of the classic group
    /// protocol's properties, which that protocol refuses.
    @Test func theConsumerGroupProtocolIsRefusedByALibrdkafkaWithoutItAndDropsTheClassicDefaults() async throws {
        let yaml = ConfigurationTests.minimal + "\nkafka:\n  librdkafka:\n    group.protocol: consumer\n"
        guard Librdkafka.version.knowsConsumerGroupProtocol else {
            let error = await Self.refusal(yaml)
            #expect(error?.key == "kafka.librdkafka.group.protocol")
            #expect(
                error?.problem.contains("No such configuration property") == true, "\(error?.problem ?? "accepted")")
            return
        }
        let loaded = try await Self.load(yaml)
        let consumer = loaded.consumerConfiguration
        #expect(consumer.groupProtocolName == "consumer")
        #expect(loaded.producerConfiguration.kafka["group.protocol"] == nil, "a producer would warn about it")
        // librdkafka itself takes the consumer the worker would make: none of the properties that protocol refuses.
        #expect(throws: Never.self) {
            _ = try KafkaConsumer(
                configuration: consumer, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        }
        for key in KafkaConsumerConfiguration.classicGroupProtocolProperties {
            #expect(consumer.effectiveProperties[key] == nil, "\(key)")
        }
        let classic = try await Self.load(ConfigurationTests.minimal).consumerConfiguration
        #expect(classic.groupProtocolName == "classic" && classic.effectiveProperties["session.timeout.ms"] == "6000")
    }

    /// The consumers' bounds on what librdkafka fetches ahead (WorkerConfiguration) are properties the loaded librdkafka
    /// takes: `fetch.queue.backoff.ms` only from 2.2, which knows it (2.0.2 would refuse the consumer).
    @Test func librdkafkaTakesTheConsumersPrefetchBounds() async throws {
        let consumer = try await Self.load(ConfigurationTests.minimal).consumerConfiguration
        #expect(consumer.effectiveProperties["queued.min.messages"] == "4096")
        #expect(consumer.effectiveProperties["max.partition.fetch.bytes"] == "65536")
        let backoff = consumer.effectiveProperties["fetch.queue.backoff.ms"]
        let expected = Librdkafka.version.knowsFetchQueueBackoff ? "100" : nil
        #expect(backoff == expected, "librdkafka \(Librdkafka.versionString)")
        #expect(throws: Never.self) {
            _ = try KafkaConsumer(
                configuration: consumer, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        }
    }

    @Test func aSecretLibrdkafkaValueIsNeverQuoted() async {
        let error = await Self.refusal(
            ConfigurationTests.minimal + "\nkafka:\n  librdkafka:\n    sasl.passwordd: hunter2\n")
        #expect(error?.key == "kafka.librdkafka.sasl.passwordd")
        #expect(error?.description.contains("hunter2") == false)
    }

    @Test func aKnownKeyGivenAListOrAMapIsRefused() async {
        let list = await Self.refusal(ConfigurationTests.minimal + "\nkafka:\n  bootstrap_servers: [a:9092, b:9092]\n")
        #expect(list?.key == "kafka.bootstrap_servers")
        #expect(list?.problem.contains("must be one value") == true, "\(list?.problem ?? "accepted")")
        let section = await Self.refusal(ConfigurationTests.minimal + "\nworker: 3\n")
        #expect(section?.key == "worker")
    }

    @Test func librdkafkaPropertiesAtTheTopAsADottedKeyAreRefusedNotIgnored() async {
        let error = await Self.refusal(
            ConfigurationTests.minimal + "\n\"kafka.librdkafka\":\n  security.protocol: SASL_SSL\n")
        #expect(error?.key == "kafka.librdkafka")
    }

    @Test func aSectionWhoseKeysAreAllCommentedOutIsFine() async throws {
        let configuration = try await Self.load(ConfigurationTests.minimal + "\nledger:\n  # url: sqlite:///x.sqlite\n")
        #expect(configuration.ledgerURL == WorkerConfiguration().ledgerURL)
    }

    @Test func aFileThatIsNoYAMLIsRefusedWithoutQuotingIt() async {
        let error = await Self.refusal(ConfigurationTests.minimal + "\ngamebase:\n  secret_key: second-s3cr3t\n")
        #expect(error?.key == "--config")
        #expect(error?.description.contains("s3cr3t") == false, "\(error?.description ?? "accepted")")
    }

    @Test func anEnvironmentVariableThatNamesNoKeyIsWarnedAbout() async throws {
        let configuration = try await Self.load(
            ConfigurationTests.minimal,
            environment: ["WORKER_MAX_INFLIGHT": "3", "WORKER_MAX_IN_FLIGHT": "4", "HOME": "/root"])
        #expect(configuration.maxInFlight == 4)
        #expect(configuration.warnings.count == 1)
        #expect(configuration.warnings.first?.contains("WORKER_MAX_INFLIGHT") == true)
        #expect(configuration.warnings.first?.contains("did you mean WORKER_MAX_IN_FLIGHT?") == true)
    }
}

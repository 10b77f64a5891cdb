import App
import Engine
import Foundation
import Fulfilment
import Gamebase
import GamebaseHTTP
import IAPTestSupport
import Kafka
import Testing

@Suite struct ConfigurationTests {
    static func file(_ yaml: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("iap-config-\(UUID().uuidString).yaml")
            .path
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static let minimal = """
        gamebase:
          app_id: app-1
          secret_key: s3cr3t-value
        """

    @Test func defaultsApplyWhereNothingIsSet() async throws {
        let configuration = try await WorkerConfiguration.load(
            configFile: try Self.file(Self.minimal), environment: [:])
        #expect(configuration.groupID == "iap-worker")
        #expect(configuration.topics.purchases == "purchase.completed")
        #expect(configuration.topics.deadLetter == "purchase.completed.dlq")
        #expect(configuration.maxInFlight == 512)
        #expect(configuration.maxMessageBytes == 65_536)
        #expect(configuration.serverPort == 8080)
        #expect(configuration.logFormat == .json)
        #expect(configuration.gamebaseSecretKey.revealed == "s3cr3t-value")
        #expect(configuration.consumerConfiguration.kafka["session.timeout.ms"] == "6000")
        #expect(
            configuration.reconcile
                == Reconciler.Configuration(
                    interval: .seconds(600), grace: .seconds(600), lookback: .seconds(72 * 3_600),
                    maxCallsPerSecond: 20))
        #expect(configuration.reconcile.isEnabled)
    }

    @Test func reconciliationIsConfiguredAndTurnedOffByItsKeys() async throws {
        let configuration = try await WorkerConfiguration.load(
            configFile: try Self.file(Self.minimal + "\nreconcile:\n  interval_ms: 5000\n  grace_ms: 0\n"),
            environment: ["RECONCILE_LOOKBACK_HOURS": "24", "RECONCILE_MAX_CALLS_PER_SECOND": "5"])
        #expect(
            configuration.reconcile
                == Reconciler.Configuration(
                    interval: .seconds(5), grace: .zero, lookback: .seconds(24 * 3_600), maxCallsPerSecond: 5))
        let displayed = Dictionary(uniqueKeysWithValues: configuration.displayed.map { ($0.key, $0.value) })
        #expect(displayed["reconcile.interval_ms"] == "5000")
        #expect(displayed["reconcile.lookback_hours"] == "24")
        let off = try await WorkerConfiguration.load(
            configFile: try Self.file(Self.minimal), environment: ["RECONCILE_INTERVAL_MS": "0"])
        #expect(!off.reconcile.isEnabled)
    }

    @Test func retentionIsConfiguredByItsKeysAndTurnedOffWithZero() async throws {
        let configuration = try await WorkerConfiguration.load(
            configFile: try Self.file(
                Self.minimal
                    + "\nledger:\n  retention:\n    published_outbox_hours: 24\n    max_unconfirmed_rows: 5000\n"),
            environment: ["LEDGER_RETENTION_REJECTIONS_DAYS": "7"])
        #expect(configuration.retention.interval == .milliseconds(300_000))
        #expect(configuration.retention.maximumAge(of: .publishedOutbox) == .seconds(24 * 3_600))
        #expect(configuration.retention.maximumAge(of: .confirmedRejections) == .seconds(7 * 86_400))
        #expect(configuration.retention.maximumCount(of: .unconfirmedRejections) == 5_000)
        #expect(!configuration.reconcile.prunesOwnState)
        let off = try await WorkerConfiguration.load(
            configFile: try Self.file(Self.minimal), environment: ["LEDGER_RETENTION_INTERVAL_MS": "0"])
        #expect(off.retention.interval == nil)
        #expect(off.reconcile.prunesOwnState, "with pruning off the reconciler keeps its own state bounded")
    }

    @Test(arguments: [
        // The alert fires when no pass caught up for an hour.
        ("LEDGER_RETENTION_INTERVAL_MS", "3600001", "ledger.retention.interval_ms"),
        ("LEDGER_RETENTION_INTERVAL_MS", "500", "ledger.retention.interval_ms"),
        ("LEDGER_RETENTION_MAX_UNCONFIRMED_ROWS", "10", "ledger.retention.max_unconfirmed_rows"),
        // A confirmed rejection must outlive the reconciler's window (72 hours by default).
        ("LEDGER_RETENTION_REJECTIONS_DAYS", "2", "ledger.retention.rejections_days"),
    ])
    func retentionValuesThatCannotWorkAreRefusedNamingTheKey(variable: String, value: String, key: String) async throws
    {
        let path = try Self.file(Self.minimal)
        let error = await #expect(throws: ConfigurationError.self) {
            try await WorkerConfiguration.load(configFile: path, environment: [variable: value])
        }
        #expect(error?.key == key)
    }

    @Test func environmentOverridesTheFile() async throws {
        let yaml = Self.minimal + "\nworker:\n  max_in_flight: 64\nkafka:\n  group_id: from-file\n"
        let configuration = try await WorkerConfiguration.load(
            configFile: try Self.file(yaml),
            environment: ["KAFKA_GROUP_ID": "from-env", "WORKER_MAX_IN_FLIGHT": "128", "LOG_FORMAT": "text"])
        #expect(configuration.groupID == "from-env")
        #expect(configuration.maxInFlight == 128)
        #expect(configuration.logFormat == .text)
    }

    @Test func gamebaseConnectionsFollowPurchasesInFlightUnlessSet() async throws {
        let followed = try await WorkerConfiguration.load(
            configFile: try Self.file(Self.minimal), environment: ["WORKER_MAX_IN_FLIGHT": "200"])
        #expect(
            followed.gamebaseMaxConnections == 200, "one connection per purchase in flight: no call waits in the pool")
        let capped = try await WorkerConfiguration.load(
            configFile: try Self.file(Self.minimal), environment: ["WORKER_MAX_IN_FLIGHT": "5000"])
        #expect(capped.gamebaseMaxConnections == 1_024)
        let set = try await WorkerConfiguration.load(
            configFile: try Self.file(Self.minimal), environment: ["GAMEBASE_MAX_CONNECTIONS": "32"])
        #expect(set.gamebaseMaxConnections == 32)
    }

    @Test func theConfigFileCanComeFromTheEnvironment() async throws {
        let path = try Self.file(Self.minimal + "\nserver:\n  port: 9191\n")
        let configuration = try await WorkerConfiguration.load(environment: ["IAP_WORKER_CONFIG": path])
        #expect(configuration.serverPort == 9191)
    }

    @Test(arguments: [
        ("worker:\n  max_in_flight: lots", "worker.max_in_flight"),
        ("worker:\n  max_in_flight: 0", "worker.max_in_flight"),
        ("server:\n  port: 70000", "server.port"),
        ("worker:\n  reject_test_purchases: maybe", "worker.reject_test_purchases"),
        ("log:\n  level: loud", "log.level"),
        ("log:\n  format: xml", "log.format"),
        ("gamebase:\n  base_url: ftp://x", "gamebase.base_url"),
        ("gamebase:\n  base_url: https://", "gamebase.base_url"),
        ("worker:\n  retry:\n    initial_backoff_ms: 900\n    max_backoff_ms: 100", "worker.retry.max_backoff_ms"),
        ("reconcile:\n  interval_ms: 10", "reconcile.interval_ms"),
        ("reconcile:\n  interval_ms: -1", "reconcile.interval_ms"),
        ("reconcile:\n  grace_ms: soon", "reconcile.grace_ms"),
        ("reconcile:\n  lookback_hours: 0", "reconcile.lookback_hours"),
        ("reconcile:\n  max_calls_per_second: 0", "reconcile.max_calls_per_second"),
    ])
    func anInvalidValueFailsNamingTheKey(yaml: String, key: String) async throws {
        var text = Self.minimal + "\n" + yaml
        if yaml.hasPrefix("gamebase:") {
            text = "gamebase:\n  app_id: a\n  secret_key: s\n" + yaml.replacingOccurrences(of: "gamebase:\n", with: "")
        }
        let path = try Self.file(text)
        let error = await #expect(throws: ConfigurationError.self) {
            try await WorkerConfiguration.load(configFile: path, environment: [:])
        }
        #expect(error?.key == key)
    }

    @Test(arguments: [
        // The grace is never over before the sighting it runs from is pruned.
        ("reconcile:\n  grace_ms: 3600000\n  lookback_hours: 1", "reconcile.grace_ms"),
        ("reconcile:\n  grace_ms: 604800000", "reconcile.grace_ms"),
        // The first pass past the grace (two intervals after the sighting) comes after the lookback.
        ("reconcile:\n  interval_ms: 2400000\n  grace_ms: 3000000\n  lookback_hours: 1", "reconcile.grace_ms"),
        // Passes further apart than the window: users active in between are never read.
        ("reconcile:\n  interval_ms: 7200000\n  grace_ms: 0\n  lookback_hours: 1", "reconcile.interval_ms"),
    ])
    func reconciliationUnderWhichNothingCouldBeTakenIsRefusedNamingTheKeys(yaml: String, key: String) async throws {
        let path = try Self.file(Self.minimal + "\n" + yaml)
        let error = await #expect(throws: ConfigurationError.self) {
            try await WorkerConfiguration.load(configFile: path, environment: [:])
        }
        #expect(error?.key == key)
        #expect(error?.problem.contains("reconcile.lookback_hours") == true)
    }

    @Test func reconciliationAtTheEdgeOfItsWindowOrTurnedOffLoads() async throws {
        let edge = try await WorkerConfiguration.load(
            configFile: try Self.file(
                Self.minimal + "\nreconcile:\n  interval_ms: 1800000\n  grace_ms: 3540000\n  lookback_hours: 1\n"),
            environment: [:])
        #expect(edge.reconcile.grace == .milliseconds(3_540_000))
        let off = try await WorkerConfiguration.load(
            configFile: try Self.file(Self.minimal + "\nreconcile:\n  interval_ms: 0\n  grace_ms: 604800000\n"),
            environment: [:])
        #expect(!off.reconcile.isEnabled, "off: nothing to refuse")
    }

    @Test func requiredKeysAreNamedWhenMissing() async throws {
        let noApp = await #expect(throws: ConfigurationError.self) {
            try await WorkerConfiguration.load(
                configFile: try Self.file("gamebase:\n  secret_key: s\n"), environment: [:])
        }
        #expect(noApp?.key == "gamebase.app_id")
        let noKey = await #expect(throws: ConfigurationError.self) {
            try await WorkerConfiguration.load(configFile: try Self.file("gamebase:\n  app_id: a\n"), environment: [:])
        }
        #expect(noKey?.key == "gamebase.secret_key")
        let noFile = await #expect(throws: ConfigurationError.self) {
            try await WorkerConfiguration.load(configFile: "/nonexistent/iap.yaml", environment: [:])
        }
        #expect(noFile?.key == "--config")
    }

    @Test func theSecretKeyCanComeFromAFile() async throws {
        let secretPath = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)")
            .path
        try "from-file-secret\n".write(toFile: secretPath, atomically: true, encoding: .utf8)
        let configuration = try await WorkerConfiguration.load(
            configFile: try Self.file("gamebase:\n  app_id: a\n"), environment: ["GAMEBASE_SECRET_KEY_FILE": secretPath]
        )
        #expect(configuration.gamebaseSecretKey.revealed == "from-file-secret")
    }

    @Test func librdkafkaPropertiesPassThroughFromFileAndEnvironment() async throws {
        let yaml =
            Self.minimal + "\nkafka:\n  librdkafka:\n    security.protocol: SASL_SSL\n    session.timeout.ms: 10000\n"
        let configuration = try await WorkerConfiguration.load(
            configFile: try Self.file(yaml), environment: ["KAFKA_LIBRDKAFKA_SASL_PASSWORD": "pw-123"])
        #expect(configuration.librdkafka["security.protocol"] == "SASL_SSL")
        #expect(configuration.librdkafka["sasl.password"] == "pw-123")
        #expect(configuration.consumerConfiguration.kafka["session.timeout.ms"] == "10000")
        #expect(
            configuration.producerConfiguration.kafka["session.timeout.ms"] == nil,
            "consumer-only properties stay off the producer")
    }

    /// librdkafka's byte bound on its prefetch counts values alone, so a backlog of small records filled it
    /// with nearly the whole topic (docs/benchmarks.md, issue #39): the consumers bound it in records too, eight per
    /// purchase in flight, and fetch at most 64 KiB per partition at once, unless the operator says otherwise.
    @Test func librdkafkasPrefetchIsBoundedInRecordsUnlessTheOperatorSetsIt() async throws {
        let defaults = try await WorkerConfiguration.load(configFile: try Self.file(Self.minimal), environment: [:])
        #expect(defaults.consumerConfiguration.kafka["queued.min.messages"] == "4096")
        #expect(defaults.consumerConfiguration.kafka["max.partition.fetch.bytes"] == "65536")
        #expect(defaults.storeNotificationsConsumerConfiguration.kafka["queued.min.messages"] == "4096")
        #expect(defaults.producerConfiguration.kafka["queued.min.messages"] == nil, "a producer would warn about it")
        let small = try await WorkerConfiguration.load(
            configFile: try Self.file(Self.minimal), environment: ["WORKER_MAX_IN_FLIGHT": "1"])
        #expect(small.consumerConfiguration.kafka["queued.min.messages"] == "2000", "2,000 at least")
        let widest = try await WorkerConfiguration.load(
            configFile: try Self.file(Self.minimal), environment: ["WORKER_MAX_IN_FLIGHT": "65536"])
        #expect(widest.consumerConfiguration.kafka["queued.min.messages"] == "524288")
        var inCode = WorkerConfiguration()
        inCode.maxInFlight = .max  // no trap, and a value librdkafka takes
        #expect(inCode.consumerConfiguration.kafka["queued.min.messages"] == "10000000")
        let tuned = try await WorkerConfiguration.load(
            configFile: try Self.file(Self.minimal),
            environment: [
                "KAFKA_LIBRDKAFKA_QUEUED_MIN_MESSAGES": "100000",
                "KAFKA_LIBRDKAFKA_MAX_PARTITION_FETCH_BYTES": "1048576",
            ])
        #expect(tuned.consumerConfiguration.kafka["queued.min.messages"] == "100000")
        #expect(tuned.consumerConfiguration.kafka["max.partition.fetch.bytes"] == "1048576")
        #expect(
            tuned.producerConfiguration.kafka["queued.min.messages"] == nil, "the consumers', kept off the producer")
        // librdkafka's own name for max.partition.fetch.bytes: set after its alias (in name order), the worker's
        // default would have overwritten the operator's value.
        let byOtherName = try await WorkerConfiguration.load(
            configFile: try Self.file(Self.minimal),
            environment: ["KAFKA_LIBRDKAFKA_FETCH_MESSAGE_MAX_BYTES": "1048576"])
        #expect(byOtherName.consumerConfiguration.kafka["fetch.message.max.bytes"] == "1048576")
        #expect(byOtherName.consumerConfiguration.kafka["max.partition.fetch.bytes"] == nil)
        #expect(byOtherName.producerConfiguration.kafka["fetch.message.max.bytes"] == nil)
    }

    /// An idempotent producer whose linger is shorter than the broker's acknowledgements spins its broker threads
    /// (docs/benchmarks.md, issue #39): the worker's producer lingers 20 ms unless the operator says otherwise.
    @Test func theProducerLingers20MillisecondsUnlessTheOperatorSetsIt() async throws {
        let defaults = try await WorkerConfiguration.load(configFile: try Self.file(Self.minimal), environment: [:])
        #expect(defaults.producerConfiguration.effectiveProperties["linger.ms"] == "20")
        #expect(defaults.producerConfiguration.effectiveProperties["enable.idempotence"] == "true")
        #expect(defaults.consumerConfiguration.kafka["linger.ms"] == nil, "a consumer would warn about it")
        let tuned = try await WorkerConfiguration.load(
            configFile: try Self.file(Self.minimal), environment: ["KAFKA_LIBRDKAFKA_LINGER_MS": "5"])
        #expect(tuned.producerConfiguration.effectiveProperties["linger.ms"] == "5")
        #expect(tuned.consumerConfiguration.kafka["linger.ms"] == nil, "the producer's, kept off the consumers")
        #expect(tuned.storeNotificationsConsumerConfiguration.kafka["linger.ms"] == nil)
        #expect(tuned.readerConfiguration(purpose: "tail").kafka["linger.ms"] == nil)
    }

    @Test func displayedConfigurationHidesSecrets() async throws {
        let yaml =
            Self.minimal
            + "\nledger:\n  url: postgres://iap:db-password@db:5432/ledger\nkafka:\n  librdkafka:\n    sasl.password: kafka-password\n"
        let configuration = try await WorkerConfiguration.load(configFile: try Self.file(yaml), environment: [:])
        let text = configuration.displayed.map { "\($0.key)=\($0.value)" }.joined(separator: "\n")
        #expect(!text.contains("s3cr3t-value"))
        #expect(!text.contains("db-password"))
        #expect(!text.contains("kafka-password"))
        #expect(text.contains("gamebase.secret_key=<redacted>"))
        #expect(text.contains("ledger.url=postgres://iap:<redacted>@db:5432/ledger"))
    }

    @Test func everyKeyIsDocumentedInTheDefaultConfigFile() throws {
        let root = TestRepository.root
        let yaml = try String(contentsOf: root.appendingPathComponent("config/iap-worker.yaml"), encoding: .utf8)
        for key in ConfigurationKey.all where !key.name.contains("<") {
            let leaf = String(key.name.split(separator: ".").last!)
            #expect(yaml.contains("\(leaf):"), "config/iap-worker.yaml lacks \(key.name)")
        }
    }
}

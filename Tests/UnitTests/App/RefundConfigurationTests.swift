import App
import AppStoreHTTP
import AppStoreSimulator
import Crypto
import Engine
import Foundation
import IAPTestSupport
import Kafka
import Stores
import Testing

/// `refunds.*` and the store-notification topics: read only when a store is configured, identifiers checked, the test
/// roots' file read and checked at load.
@Suite struct RefundConfigurationTests {
    static func load(_ environment: [String: String]) async throws -> WorkerConfiguration {
        try await WorkerConfiguration.load(
            configFile: try ConfigurationTests.file(ConfigurationTests.minimal), environment: environment)
    }

    static func problem(_ environment: [String: String]) async -> String? {
        do {
            _ = try await load(environment)
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test func notificationsAreReadOnlyWhenAStoreIsConfigured() async throws {
        let plain = try await Self.load([:])
        #expect(plain.topics.storeNotifications == "store.notifications")
        #expect(plain.topics.itemRevoked == "iap.item-revoked")
        #expect(!plain.readsStoreNotifications)

        let google = try await Self.load(["REFUNDS_GOOGLE_PACKAGE_NAME": "com.studio.game"])
        #expect(google.readsStoreNotifications)
        #expect(google.storeNotificationsConsumerConfiguration.groupID == "iap-worker.store-notifications")

        let off = try await Self.load([
            "REFUNDS_GOOGLE_PACKAGE_NAME": "com.studio.game", "KAFKA_TOPICS_STORE_NOTIFICATIONS": "",
        ])
        #expect(!off.readsStoreNotifications)
        let offInFile = try await WorkerConfiguration.load(
            configFile: try ConfigurationTests.file(
                ConfigurationTests.minimal
                    + "\nkafka:\n  topics:\n    store_notifications: \"\"\nrefunds:\n  google:\n    package_name: com.a.b\n"
            ),
            environment: [:])
        #expect(offInFile.topics.storeNotifications == "")
        #expect(!offInFile.readsStoreNotifications)

        let apple = try await Self.load([
            "REFUNDS_APPLE_BUNDLE_ID": "com.studio.game", "REFUNDS_APPLE_ENVIRONMENT": "Sandbox",
            "KAFKA_GROUP_INSTANCE_ID": "pod-0",
        ])
        #expect(apple.refunds.appleEnvironment == "sandbox")
        #expect(apple.storeNotificationsConsumerConfiguration.groupInstanceID == "pod-0.store-notifications")
        #expect(apple.consumerConfiguration.groupInstanceID == "pod-0")
    }

    @Test func consumptionStatementsGivenWithoutConsumptionAnswersAreWarnedAboutNotRefused() async throws {
        let given = try await Self.load([
            "REFUNDS_APPLE_CUSTOMER_CONSENTED": "true", "REFUNDS_APPLE_REFUND_PREFERENCE": "DECLINE",
        ])
        #expect(given.refunds.consumptionAnswers == nil)
        #expect(given.warnings.count == 2, "\(given.warnings)")
        #expect(given.warnings.contains { $0.hasPrefix("refunds.apple.customer_consented is set but has no effect") })
        #expect(given.warnings.contains { $0.hasPrefix("refunds.apple.refund_preference is set but has no effect") })
        // Their defaults, as the shipped configuration file spells them out, say nothing.
        let defaults = try await Self.load([
            "REFUNDS_APPLE_CUSTOMER_CONSENTED": "false", "REFUNDS_APPLE_SAMPLE_CONTENT_PROVIDED": "false",
        ])
        #expect(defaults.warnings.isEmpty)
    }

    /// The configuration file the image and the packages ship, as it is: the worker starts with it (it spells out the
    /// refunds' defaults, `consumption_info: false` among them).
    @Test func theShippedConfigurationFileLoads() async throws {
        let root = TestRepository.root
        let shipped = root.appendingPathComponent("config/iap-worker.yaml").path
        let configuration = try await WorkerConfiguration.load(
            configFile: shipped, environment: ["GAMEBASE_APP_ID": "app-1", "GAMEBASE_SECRET_KEY": "s3cr3t-value"])
        #expect(configuration.refunds.consumptionAnswers == nil)
        #expect(configuration.warnings.isEmpty, "\(configuration.warnings)")
    }

    @Test func hostileOrWrongValuesAreRefusedNamingTheKey() async throws {
        let cases: [([String: String], String)] = [
            (["REFUNDS_GOOGLE_PACKAGE_NAME": "com.studio;rm -rf"], "refunds.google.package_name"),
            (["REFUNDS_GOOGLE_PACKAGE_NAME": "nodots"], "refunds.google.package_name"),
            (["REFUNDS_GOOGLE_PACKAGE_NAME": String(repeating: "a.", count: 200)], "refunds.google.package_name"),
            (["REFUNDS_APPLE_BUNDLE_ID": "com.studio\u{0}game"], "refunds.apple.bundle_id"),
            (
                ["REFUNDS_APPLE_BUNDLE_ID": "com.x", "REFUNDS_APPLE_ENVIRONMENT": "staging"],
                "refunds.apple.environment"
            ),
            (["REFUNDS_APPLE_ROOT_CERTIFICATES_FILE": "/etc/hostname"], "refunds.apple.root_certificates_file"),
            (
                ["REFUNDS_APPLE_BUNDLE_ID": "com.x", "REFUNDS_APPLE_ROOT_CERTIFICATES_FILE": "/nonexistent/roots.pem"],
                "refunds.apple.root_certificates_file"
            ),
        ]
        for (environment, key) in cases {
            let problem = await Self.problem(environment)
            #expect(problem?.contains("configuration key \(key)") == true, "\(environment): \(problem ?? "accepted")")
        }
    }

    /// A test root left in a deployment that reads Apple itself (no simulator's base_url) is refused at start: with
    /// it, whoever holds the test chain's key could sign refunds. Apple's own root in the file is harmless.
    @Test func aTestRootIsRefusedUnlessItsSimulatorIsConfigured() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("iap-roots-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let chain = try AppleSigningChain(around: Date())
        let test = folder.appendingPathComponent("test-root.pem")
        try Data(try chain.rootPEM.utf8).write(to: test)
        let keyFile = folder.appendingPathComponent("AuthKey.p8")
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: keyFile)
        let poller = [
            "REFUNDS_APPLE_BUNDLE_ID": "com.x", "REFUNDS_APPLE_ISSUER_ID": "issuer", "REFUNDS_APPLE_KEY_ID": "KEY1",
            "REFUNDS_APPLE_PRIVATE_KEY_FILE": keyFile.path, "REFUNDS_APPLE_ROOT_CERTIFICATES_FILE": test.path,
        ]
        for environment in [
            ["REFUNDS_APPLE_BUNDLE_ID": "com.x", "REFUNDS_APPLE_ROOT_CERTIFICATES_FILE": test.path],
            poller, poller.merging(["REFUNDS_APPLE_ENVIRONMENT": "sandbox"]) { $1 },
            poller.merging(["REFUNDS_APPLE_BASE_URL": "https://api.storekit.itunes.apple.com"]) { $1 },
            poller.merging(["REFUNDS_APPLE_BASE_URL": "https://API.StoreKit-Sandbox.iTunes.Apple.com/"]) { $1 },
            // The same host spelled otherwise: a fully qualified name's final dot, a percent-escaped letter.
            poller.merging(["REFUNDS_APPLE_BASE_URL": "https://api.storekit.itunes.apple.com./"]) { $1 },
            poller.merging(["REFUNDS_APPLE_BASE_URL": "https://api.storekit.itunes.%61pple.com/"]) { $1 },
        ] {
            let problem = await Self.problem(environment)
            #expect(
                problem?.contains("configuration key refunds.apple.root_certificates_file") == true,
                "\(problem ?? "accepted")")
            #expect(problem?.contains("refunds.apple.base_url") == true, "\(problem ?? "accepted")")
        }
        // A host no resolver could take is no simulator's either: refused as a URL, before the root is looked at.
        for url in ["https://api.storekit.itunes.apple.com%80/", "https://apple.com%0d%0aX-Evil:%201/"] {
            let problem = await Self.problem(poller.merging(["REFUNDS_APPLE_BASE_URL": url]) { $1 })
            #expect(
                problem?.contains("configuration key refunds.apple.base_url") == true,
                "\(url): \(problem ?? "accepted")")
        }
        let simulated = try await Self.load(poller.merging(["REFUNDS_APPLE_BASE_URL": "http://127.0.0.1:9"]) { $1 })
        #expect(simulated.refunds.appleRootCertificatesPEM != nil)
    }

    @Test func theClockSkewAllowanceIsAKeyWithASafeDefault() async throws {
        #expect(try await Self.load([:]).refunds.maxClockSkew == .seconds(300))
        #expect(try await Self.load(["REFUNDS_MAX_CLOCK_SKEW_MS": "900000"]).refunds.maxClockSkew == .seconds(900))
        for value in ["-1", "0", "999", "3600001", "ten"] {
            let problem = await Self.problem(["REFUNDS_MAX_CLOCK_SKEW_MS": value])
            #expect(
                problem?.contains("configuration key refunds.max_clock_skew_ms") == true,
                "\(value): \(problem ?? "accepted")")
        }
    }

    @Test func aRootsFileIsReadAtLoadAndMustHoldCertificates() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("iap-roots-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let good = folder.appendingPathComponent("roots.pem").path
        try AppleRootCertificates.rootCAG3PEM.write(toFile: good, atomically: true, encoding: .utf8)
        let configuration = try await Self.load([
            "REFUNDS_APPLE_BUNDLE_ID": "com.x", "REFUNDS_APPLE_ROOT_CERTIFICATES_FILE": good,
        ])
        #expect(configuration.refunds.appleRootCertificatesPEM == AppleRootCertificates.rootCAG3PEM)

        let key = folder.appendingPathComponent("key.pem").path
        try "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".write(
            toFile: key, atomically: true, encoding: .utf8)
        let problem = await Self.problem([
            "REFUNDS_APPLE_BUNDLE_ID": "com.x", "REFUNDS_APPLE_ROOT_CERTIFICATES_FILE": key,
        ])
        #expect(problem?.contains("not a certificate") == true, "\(problem ?? "accepted")")
        #expect(problem?.contains("AAAA") == false, "the file's content is never quoted")
    }

    @Test func thePollerAndItsAnswersNeedTheirKeysTogether() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("iap-key-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let keyFile = folder.appendingPathComponent("AuthKey.p8").path
        try P256.Signing.PrivateKey().pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
        let apple = [
            "REFUNDS_APPLE_BUNDLE_ID": "com.studio.game", "REFUNDS_APPLE_ISSUER_ID": "issuer-1",
            "REFUNDS_APPLE_KEY_ID": "KEY1", "REFUNDS_APPLE_PRIVATE_KEY_FILE": keyFile,
        ]
        let poller = try await Self.load(apple.merging(["REFUNDS_APPLE_ENVIRONMENT": "sandbox"]) { $1 })
        #expect(poller.refunds.appleKey?.keyId == "KEY1")
        #expect(poller.refunds.appStoreURL == "https://api.storekit-sandbox.itunes.apple.com")
        #expect(poller.refunds.consumptionAnswers == nil)
        let shown = poller.displayed.map { "\($0.key)=\($0.value)" }.joined(separator: "\n")
        #expect(!shown.contains("BEGIN"), "the key itself is never shown")

        let answers = try await Self.load(
            apple.merging([
                "REFUNDS_APPLE_CONSUMPTION_INFO": "true", "REFUNDS_APPLE_CUSTOMER_CONSENTED": "true",
                "REFUNDS_APPLE_REFUND_PREFERENCE": "decline",
            ]) { $1 })
        #expect(answers.refunds.consumptionAnswers?.refundPreference == "DECLINE")

        let garbage = folder.appendingPathComponent("garbage.p8").path
        try "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n".write(
            toFile: garbage, atomically: true, encoding: .utf8)
        let cases: [([String: String], String)] = [
            (["REFUNDS_APPLE_CONSUMPTION_INFO": "true"], "refunds.apple.consumption_info"),
            (apple.merging(["REFUNDS_APPLE_CONSUMPTION_INFO": "true"]) { $1 }, "refunds.apple.customer_consented"),
            (
                apple.merging([
                    "REFUNDS_APPLE_CONSUMPTION_INFO": "true", "REFUNDS_APPLE_CUSTOMER_CONSENTED": "true",
                    "REFUNDS_APPLE_REFUND_PREFERENCE": "MAYBE",
                ]) { $1 }, "refunds.apple.refund_preference"
            ),
            (apple.merging(["REFUNDS_APPLE_PRIVATE_KEY_FILE": garbage]) { $1 }, "refunds.apple.private_key_file"),
            (apple.filter { $0.key != "REFUNDS_APPLE_KEY_ID" }, "refunds.apple.key_id"),
            (apple.filter { $0.key != "REFUNDS_APPLE_BUNDLE_ID" }, "refunds.apple.issuer_id"),
            (["REFUNDS_APPLE_KEY_ID": "KEY1"], "refunds.apple.key_id"),
            // The signed token never goes over plain HTTP beyond this machine.
            (apple.merging(["REFUNDS_APPLE_BASE_URL": "http://appstore.example.com"]) { $1 }, "refunds.apple.base_url"),
            // Apple waits 12 hours for an answer: a poller reading less often than hourly cannot answer in time.
            (
                apple.merging([
                    "REFUNDS_APPLE_CONSUMPTION_INFO": "true", "REFUNDS_APPLE_CUSTOMER_CONSENTED": "true",
                    "REFUNDS_APPLE_INTERVAL_MS": "7200000",
                ]) { $1 }, "refunds.apple.interval_ms"
            ),
        ]
        for (environment, key) in cases {
            let problem = await Self.problem(environment)
            #expect(problem?.contains("configuration key \(key)") == true, "\(environment): \(problem ?? "accepted")")
            #expect(problem?.contains("c2VjcmV0") != true, "a key file's content is never quoted")
        }
    }
}

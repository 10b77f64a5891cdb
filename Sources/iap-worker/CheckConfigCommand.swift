import App
import AppStoreHTTP
import ArgumentParser
import Foundation
import Fulfilment
import Gamebase
import GamebaseHTTP
import GooglePlayHTTP
import Kafka
import Ledger
import Logging

struct CheckConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract:
            "Validates and prints the effective configuration (secrets redacted), then tests Kafka, Gamebase, the ledger and the stores' APIs."
    )

    @Option(name: .customLong("config"), help: "YAML configuration file (default: $IAP_WORKER_CONFIG).")
    var configFile: String?
    @Flag(name: .customLong("offline"), help: "Only validate and print; test no connection.")
    var offline = false

    func run() async throws {
        let configuration = try await WorkerConfiguration.load(configFile: configFile)
        print("configuration: valid")
        for warning in configuration.warnings { print("  warning: \(warning)") }
        let width = configuration.displayed.map(\.key.count).max() ?? 0
        for (key, value) in configuration.displayed {
            print("  \(key.padding(toLength: width, withPad: " ", startingAt: 0))  \(value)")
        }
        guard !offline else { return }
        var logger = Logger(label: "iap-worker.check-config")
        logger.logLevel = .critical
        var failures = 0
        print("connectivity:")

        // Kafka: the brokers answer a metadata request and the purchases topic exists.
        var producer: KafkaProducer?
        do {
            let opened = try KafkaProducer(configuration: configuration.producerConfiguration, logger: logger)
            producer = opened
            let metadata = try await opened.metadata(timeoutMilliseconds: 10_000)
            var line = "ok: \(metadata.brokers) broker(s)"
            for topic in [
                configuration.topics.purchases, configuration.topics.itemGranted, configuration.topics.consumeFailed,
                configuration.topics.deadLetter,
            ] {
                line += metadata.topics[topic].map { ", \(topic) (\($0) partitions)" } ?? ", \(topic) MISSING"
            }
            print("  kafka     \(line)")
        } catch {
            failures += 1
            // A broker reached but not understood says why (the client library, the protocol, the credentials);
            // librdkafka's own error is only "transport failure".
            print("  kafka     FAILED: \(producer?.brokerProblem.map { "\($0)" } ?? "\(error)")")
        }
        await producer?.close(timeoutMilliseconds: 1_000)

        // Gamebase: an unknown token must be refused as a purchase problem, not a configuration problem.
        let client = GamebaseClient(configuration: configuration.gamebaseConfiguration, logger: logger)
        do {
            _ = try await client.paymentTransaction(accessToken: "iap-worker-check-config", transactionID: .init())
            print("  gamebase  ok")
        } catch {
            switch error.kind {
            case .permanent, .alreadyConsumed:
                print(
                    "  gamebase  ok: authenticated (a probe token was refused with resultCode \(error.resultCode?.description ?? "-"), as expected)"
                )
            case .configuration:
                failures += 1
                print(
                    "  gamebase  FAILED: configuration rejected (resultCode \(error.resultCode?.description ?? "-")): check gamebase.app_id and the secret key"
                )
            case .transient:
                failures += 1
                print("  gamebase  FAILED: unreachable: \(error.message)")
            }
        }
        try? await client.shutdown()

        // Ledger: reachable; the schema is migrated by `run` at start.
        do {
            let unconsumed = try await LedgerStores.withStore(
                url: configuration.ledgerURL, logger: logger, migrate: false
            ) { store in
                try await store.countUnconsumed()
            }
            print("  ledger    ok: \(configuration.redactedLedgerURL), \(unconsumed) grant(s) awaiting Consume")
        } catch let error as LedgerError where error.code == .missingTable {
            // Reachable, but the tables are not there yet: `run` migrates at start.
            print(
                "  ledger    ok: \(configuration.redactedLedgerURL) reachable; schema not migrated yet (run migrates it at start)"
            )
        } catch {
            failures += 1
            print("  ledger    FAILED: \(error) (\(configuration.redactedLedgerURL))")
        }
        failures += await checkStores(configuration, logger: logger)
        if failures > 0 { throw ExitCode(1) }
    }

    /// The stores' APIs the history pollers read: one call each with the configured key, over the last hour (Apple's
    /// Get Notification History of refunds; Google's voided purchases, through the token endpoint first). Answers how
    /// many failed.
    func checkStores(_ configuration: WorkerConfiguration, logger: Logger) async -> Int {
        var failures = 0
        let hourAgo = Date().addingTimeInterval(-3_600)
        if let key = configuration.refunds.appleKey {
            let client = AppStoreClient(
                baseURL: configuration.refunds.appStoreURL, key: key, timeout: .seconds(10), logger: logger)
            do {
                _ = try await client.notificationHistory(
                    NotificationHistoryRequest(startDate: hourAgo, endDate: Date(), notificationType: "REFUND"))
                print("  apple     ok: Get Notification History answers the key \(key.keyId)")
            } catch {
                failures += 1
                print("  apple     FAILED: \(error)")
            }
            await client.shutdown()
        }
        if let account = configuration.refunds.googleAccount, let package = configuration.refunds.googlePackageName {
            let client = GooglePlayClient(
                baseURL: configuration.refunds.googleBaseURL, packageName: package, account: account,
                timeout: .seconds(10), logger: logger)
            do {
                _ = try await client.voidedPurchases(
                    VoidedPurchasesRequest(startTime: hourAgo, endTime: Date().addingTimeInterval(-10)))
                print("  google    ok: \(account.clientEmail) reads the voided purchases of \(package)")
            } catch  where error.result == "rate_limited" {
                // Past the token endpoint, the API only asks to wait: the account works; the workers share the quota.
                print(
                    "  google    ok: \(account.clientEmail) authenticated; the API's quota is spent for now (HTTP 429)")
            } catch {
                failures += 1
                print("  google    FAILED: \(error.result): \(error)")
            }
            await client.shutdown()
        }
        return failures
    }
}

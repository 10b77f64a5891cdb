import AppStoreHTTP
import Console
import Engine
import Foundation
import Fulfilment
import Gamebase
import GamebaseHTTP
import GooglePlayHTTP
import Ledger
import Logging
import Wire

extension WorkerConfiguration {
    /// `ledger.url` with its password replaced.
    public var redactedLedgerURL: String {
        (try? LedgerURL(ledgerURL)).map { "\($0)" } ?? "<invalid>"
    }

    /// Every key with its effective value, secrets redacted, in the order of ``ConfigurationKey/all``.
    public var displayed: [(key: String, value: String)] {
        var rows: [(String, String)] = [
            ("kafka.bootstrap_servers", bootstrapServers), ("kafka.group_id", groupID), ("kafka.client_id", clientID),
            ("kafka.group_instance_id", groupInstanceID ?? "(none)"), ("kafka.topics.purchases", topics.purchases),
            ("kafka.topics.item_granted", topics.itemGranted), ("kafka.topics.consume_failed", topics.consumeFailed),
            ("kafka.topics.dead_letter", topics.deadLetter),
            (
                "kafka.topics.store_notifications",
                topics.storeNotifications.isEmpty ? "(off)" : topics.storeNotifications
            ),
            ("kafka.topics.item_revoked", topics.itemRevoked),
        ]
        for (key, value) in librdkafka.sorted(by: { $0.key < $1.key }) {
            rows.append(("kafka.librdkafka.\(key)", KafkaSecrets.isSecret(key) ? "<redacted>" : value))
        }
        rows += [
            ("gamebase.base_url", Self.withoutCredentials(gamebaseBaseURL)), ("gamebase.app_id", gamebaseAppID),
            ("gamebase.secret_key", gamebaseSecretKey.isEmpty ? "(none)" : "<redacted>"),
            ("gamebase.timeout_ms", String(gamebaseTimeoutMilliseconds)),
            ("gamebase.max_connections", String(gamebaseMaxConnections)), ("ledger.url", redactedLedgerURL),
            ("ledger.min_free_bytes", String(ledgerMinFreeBytes)),
            ("ledger.retention.interval_ms", String(retention.interval.map(Self.milliseconds) ?? 0)),
            ("ledger.retention.batch_rows", String(retention.batchRows)),
            ("ledger.retention.published_outbox_hours", String(retention.publishedOutboxHours)),
            ("ledger.retention.rejections_days", String(retention.rejectionsDays)),
            ("ledger.retention.unconfirmed_rejections_hours", String(retention.unconfirmedRejectionsHours)),
            ("ledger.retention.dead_letters_days", String(retention.deadLettersDays)),
            ("ledger.retention.store_notifications_days", String(retention.storeNotificationsDays)),
            ("ledger.retention.max_unconfirmed_rows", String(retention.maxUnconfirmedRows)),
            ("worker.max_in_flight", String(maxInFlight)), ("worker.max_message_bytes", String(maxMessageBytes)),
            ("worker.max_buffered_bytes", String(maxBufferedBytes)),
            ("worker.retry.max_attempts", String(retry.maxAttempts)),
            ("worker.retry.initial_backoff_ms", String(Self.milliseconds(retry.initialBackoff))),
            ("worker.retry.max_backoff_ms", String(Self.milliseconds(retry.maxBackoff))),
            ("worker.reject_test_purchases", String(rejectTestPurchases)),
            ("worker.shutdown_timeout_ms", String(shutdownTimeoutMilliseconds)),
            ("reconcile.interval_ms", String(Self.milliseconds(reconcile.interval))),
            ("reconcile.grace_ms", String(Self.milliseconds(reconcile.grace))),
            ("reconcile.lookback_hours", String(Self.milliseconds(reconcile.lookback) / 3_600_000)),
            ("reconcile.max_calls_per_second", String(reconcile.maxCallsPerSecond)),
            ("refunds.google.package_name", refunds.googlePackageName ?? "(none)"),
            (
                "refunds.google.service_account_file",
                refunds.googleServiceAccountFile.map { "\($0) (\(refunds.googleAccount?.clientEmail ?? "-"))" }
                    ?? "(none: no voided purchases poller)"
            ),
            ("refunds.google.base_url", refunds.googleAccount == nil ? "(none)" : refunds.googleBaseURL),
            ("refunds.google.interval_ms", String(Self.milliseconds(refunds.googlePollInterval))),
            ("refunds.apple.bundle_id", refunds.appleBundleId ?? "(none)"),
            ("refunds.apple.environment", refunds.appleEnvironment),
            ("refunds.apple.issuer_id", refunds.appleKey?.issuerId ?? "(none: no history poller)"),
            ("refunds.apple.key_id", refunds.appleKey?.keyId ?? "(none)"),
            ("refunds.apple.private_key_file", refunds.applePrivateKeyFile ?? "(none)"),
            ("refunds.apple.base_url", refunds.appleKey == nil ? "(none)" : refunds.appStoreURL),
            ("refunds.apple.interval_ms", String(Self.milliseconds(refunds.applePollInterval))),
            ("refunds.apple.consumption_info", String(refunds.consumptionAnswers != nil)),
            ("refunds.apple.customer_consented", String(refunds.consumptionAnswers?.customerConsented ?? false)),
            (
                "refunds.apple.sample_content_provided",
                String(refunds.consumptionAnswers?.sampleContentProvided ?? false)
            ),
            ("refunds.apple.refund_preference", refunds.consumptionAnswers?.refundPreference ?? "(none)"),
            ("refunds.apple.root_certificates_file", refunds.appleRootCertificatesFile ?? "(built in)"),
            ("refunds.max_clock_skew_ms", String(Self.milliseconds(refunds.maxClockSkew))),
            ("server.port", String(serverPort)),
            ("console.port", String(console.port)), ("console.address", console.address),
            ("console.token_file", consoleTokenFile ?? "(none)"),
            ("console.environment", console.environment.isEmpty ? "(none)" : console.environment),
            ("console.show_payloads", String(console.showPayloads)),
            ("log.level", logLevel.rawValue), ("log.format", logFormat.rawValue),
        ]
        return rows
    }

    /// A URL without the user and password it may carry (`https://user:pass@host` → `https://<redacted>@host`).
    static func withoutCredentials(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.user != nil || components.password != nil else {
            return url
        }
        components.user = "<redacted>"
        components.password = nil
        return components.string ?? "<invalid>"
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}

enum KafkaSecrets {
    static func isSecret(_ property: String) -> Bool {
        let lowered = property.lowercased()
        return lowered.contains("password") || lowered.contains("secret") || lowered.contains("ssl.key")
            || lowered.contains("sasl.oauthbearer.config")
    }
}

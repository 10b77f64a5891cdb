import Foundation

/// One configuration key of DESIGN §5: its name, default and meaning. The single list of keys: loading,
/// `check-config`, `config/iap-worker.yaml` and the README's table all follow it (a test compares them).
public struct ConfigurationKey: Sendable, Hashable {
    public var name: String
    /// `nil`: no default (required, or optional with no value).
    public var defaultValue: String?
    public var meaning: String
    public var isSecret: Bool
    public var isRequired: Bool

    public init(
        _ name: String, default defaultValue: String?, _ meaning: String, secret: Bool = false, required: Bool = false
    ) {
        self.name = name
        self.defaultValue = defaultValue
        self.meaning = meaning
        self.isSecret = secret
        self.isRequired = required
    }

    /// The environment variable that overrides it: upper-cased, dots as underscores.
    public var environmentName: String {
        name.uppercased().replacingOccurrences(of: ".", with: "_")
    }

    public static let all: [ConfigurationKey] = [
        ConfigurationKey("kafka.bootstrap_servers", default: "localhost:9092", "Kafka bootstrap servers, host:port,…"),
        ConfigurationKey("kafka.group_id", default: "iap-worker", "Consumer group shared by all instances"),
        ConfigurationKey("kafka.client_id", default: "iap-worker", "librdkafka client.id"),
        ConfigurationKey(
            "kafka.group_instance_id", default: nil,
            "Static membership id (e.g. the pod name): a restarted instance keeps its partitions without a rebalance"),
        ConfigurationKey(
            "kafka.topics.purchases", default: "purchase.completed", "Topic of purchase-completed messages"),
        ConfigurationKey("kafka.topics.item_granted", default: "iap.item-granted", "Topic of item-granted events"),
        ConfigurationKey(
            "kafka.topics.consume_failed", default: "iap.consume-failed", "Topic of consume-failed events"),
        ConfigurationKey("kafka.topics.dead_letter", default: "purchase.completed.dlq", "Dead-letter topic"),
        ConfigurationKey(
            "kafka.topics.store_notifications", default: "store.notifications",
            "Topic of the stores' refund notifications (Google RTDN, Apple V2 bodies), read when refunds.google or "
                + "refunds.apple is set (\"\": off)"),
        ConfigurationKey(
            "kafka.topics.item_revoked", default: "iap.item-revoked", "Topic of item-revoked and refund-reversed events"
        ),
        ConfigurationKey(
            "kafka.librdkafka.<property>", default: nil,
            "Any librdkafka property, passed through (security.protocol, sasl.*, ssl.*, session.timeout.ms …)"),
        ConfigurationKey(
            "gamebase.base_url", default: "https://api-gamebase.nhncloudservice.com", "Gamebase API base URL"),
        ConfigurationKey("gamebase.app_id", default: nil, "NHN Cloud project id (app id)", required: true),
        ConfigurationKey(
            "gamebase.secret_key", default: nil, "Gamebase secret key (or use gamebase.secret_key_file)", secret: true),
        ConfigurationKey(
            "gamebase.secret_key_file", default: nil, "File holding the secret key (e.g. a mounted Kubernetes secret)"),
        ConfigurationKey(
            "gamebase.timeout_ms", default: "10000", "Timeout of each Gamebase call (Consume never below 10000)"),
        ConfigurationKey(
            "gamebase.max_connections", default: "worker.max_in_flight, at most 1024",
            "Connections kept to Gamebase at most (fewer than purchases in flight queues calls)"),
        ConfigurationKey(
            "ledger.url", default: "sqlite:///var/lib/iap-worker/ledger.sqlite",
            "sqlite:///path (one instance) or postgres://user:pass@host:5432/db (shared)", secret: true),
        ConfigurationKey(
            "ledger.min_free_bytes", default: "67108864",
            "SQLite: intake pauses while the ledger's file system has less free space than this (64 MiB; 0: no floor)"),
        ConfigurationKey(
            "ledger.retention.interval_ms", default: "300000",
            "Between pruning passes, at most 3600000 (the first 30 s after start); 0 turns pruning off"),
        ConfigurationKey("ledger.retention.batch_rows", default: "1000", "Rows deleted per transaction"),
        ConfigurationKey(
            "ledger.retention.published_outbox_hours", default: "72",
            "Published outbox rows (events already on Kafka) are deleted after this; unpublished ones never (0: kept)"),
        ConfigurationKey(
            "ledger.retention.rejections_days", default: "30",
            "Rejections Gamebase confirmed as the claimant's (not_consumable, consumed_without_grant, test_purchase); at least reconcile.lookback_hours (0: kept)"
        ),
        ConfigurationKey(
            "ledger.retention.unconfirmed_rejections_hours", default: "24",
            "Rejections anyone could cause (invalid_purchase, payment_mismatch, user_mismatch…), with their published events (0: kept)"
        ),
        ConfigurationKey(
            "ledger.retention.dead_letters_days", default: "30",
            "Recorded dead letters (the topic keeps its own) (0: kept)"),
        ConfigurationKey(
            "ledger.retention.store_notifications_days", default: "30",
            "Store notifications that are no refund (a Google notification per purchase, subscriptions', tests') and refused notifications (0: kept); refunds are kept"
        ),
        ConfigurationKey(
            "ledger.retention.max_unconfirmed_rows", default: "1000000",
            "At most this many unconfirmed rejections, dead letters of malformed records, refused notifications and store notifications that changed nothing, each, oldest removed first (0: no bound)"
        ),
        ConfigurationKey("worker.max_in_flight", default: "512", "Purchases processed at once"),
        ConfigurationKey("worker.max_message_bytes", default: "65536", "Larger purchase messages are malformed"),
        ConfigurationKey(
            "worker.max_buffered_bytes", default: "67108864",
            "Bytes of fetched records held at most: ¼ librdkafka prefetch, ¼ waiting, ½ in flight"),
        ConfigurationKey(
            "worker.retry.max_attempts", default: "4", "Attempts of a failing Gamebase call within one message"),
        ConfigurationKey(
            "worker.retry.initial_backoff_ms", default: "200", "First retry wait (exponential, full jitter)"),
        ConfigurationKey("worker.retry.max_backoff_ms", default: "5000", "Longest retry wait"),
        ConfigurationKey(
            "worker.reject_test_purchases", default: "false", "Reject store test purchases (reason test_purchase)"),
        ConfigurationKey(
            "worker.shutdown_timeout_ms", default: "30000", "How long SIGTERM waits for in-flight purchases"),
        ConfigurationKey(
            "reconcile.interval_ms", default: "600000",
            "Between reconciliation passes through Gamebase's List Consumables (0 turns reconciliation off)"),
        ConfigurationKey(
            "reconcile.grace_ms", default: "600000",
            "How long a payment stays unconsumed and ungranted, from the pass that first saw it, before it is taken"),
        ConfigurationKey(
            "reconcile.lookback_hours", default: "72",
            "Users with a grant (or a confirmed rejection) this recent are reconciled"),
        ConfigurationKey(
            "reconcile.max_calls_per_second", default: "20",
            "Gamebase calls a second by one instance's reconciler at most (List Consumables, Get Payment Transaction, "
                + "Consume)"),
        ConfigurationKey(
            "refunds.google.package_name", default: nil,
            "The Android package whose voided purchases revoke grants (notifications about another are refused)"),
        ConfigurationKey(
            "refunds.google.service_account_file", default: nil,
            "A service account's JSON key (View financial data in Play Console): set, the worker polls Google Play's "
                + "Voided Purchases API"),
        ConfigurationKey(
            "refunds.google.base_url", default: "https://androidpublisher.googleapis.com",
            "Google Play Developer API's host (tests: a simulator)"),
        ConfigurationKey(
            "refunds.google.interval_ms", default: "300000", "Between readings of Google Play's voided purchases"),
        ConfigurationKey(
            "refunds.apple.bundle_id", default: nil,
            "The app whose App Store refunds revoke grants; Apple notifications are believed only when signed for it"),
        ConfigurationKey(
            "refunds.apple.environment", default: "production", "production or sandbox: the other one is refused"),
        ConfigurationKey(
            "refunds.apple.issuer_id", default: nil,
            "The In-App Purchase key's issuer id: set, the worker polls Apple's notification history with that key"),
        ConfigurationKey("refunds.apple.key_id", default: nil, "The In-App Purchase key's id"),
        ConfigurationKey(
            "refunds.apple.private_key_file", default: nil, "The In-App Purchase key (.p8 file, a P-256 private key)"),
        ConfigurationKey(
            "refunds.apple.base_url", default: "Apple's host for the environment",
            "The App Store Server API (https://api.storekit.itunes.apple.com, or -sandbox)"),
        ConfigurationKey(
            "refunds.apple.interval_ms", default: "300000", "Between readings of Apple's notification history"),
        ConfigurationKey(
            "refunds.apple.consumption_info", default: "false",
            "Answer Apple's CONSUMPTION_REQUESTs from the ledger (needs the poller and customer_consented)"),
        ConfigurationKey(
            "refunds.apple.customer_consented", default: "false",
            "The studio's statement that its terms obtain the player's consent to share consumption data"),
        ConfigurationKey(
            "refunds.apple.sample_content_provided", default: "false",
            "Whether the app gives a free sample or trial of the content before purchase"),
        ConfigurationKey(
            "refunds.apple.refund_preference", default: nil,
            "GRANT_FULL, GRANT_PRORATED or DECLINE: the studio's preference sent with each answer (unset: none)"),
        ConfigurationKey(
            "refunds.apple.root_certificates_file", default: nil,
            "Tests only: PEM roots trusted instead of the built-in Apple Root CA - G3"),
        ConfigurationKey(
            "refunds.max_clock_skew_ms", default: "300000",
            "How far a store's signed time may lie ahead of this host's clock (a later one is refused, kept, counted)"),
        ConfigurationKey("server.port", default: "8080", "HTTP port of /metrics, /healthz and /readyz"),
        ConfigurationKey("console.port", default: "8081", "Port of the read-only operator console (0 turns it off)"),
        ConfigurationKey(
            "console.address", default: "127.0.0.1",
            "Address the console listens on; any address beyond loopback requires console.token_file"),
        ConfigurationKey(
            "console.token_file", default: nil,
            "File holding the console's bearer token (16 bytes at least; a browser sends it as the Basic password)"),
        ConfigurationKey("console.environment", default: nil, "The banner on every console page, e.g. production"),
        ConfigurationKey(
            "console.show_payloads", default: "false",
            "Dead-lettered records' values can be opened in the console (tokens masked); off, only their size"),
        ConfigurationKey("log.level", default: "info", "trace, debug, info, notice, warning, error or critical"),
        ConfigurationKey("log.format", default: "json", "json or text"),
    ]
}

import Fulfilment
/// The ledger's tables, the same in SQLite and PostgreSQL but for column types.
///
/// Times are epoch milliseconds (`BIGINT`), so both stores compare them the same way.
enum LedgerSchema {
    enum Dialect { case sqlite, postgres }

    static func migrations(_ dialect: Dialect) -> [LedgerMigration] {
        let blob = dialect == .sqlite ? "BLOB" : "BYTEA"
        let bool = dialect == .sqlite ? "INTEGER" : "BOOLEAN"
        return [
            LedgerMigration(
                name: "001_create_ledger",
                sql: [
                    """
                    CREATE TABLE grants (
                        payment_seq TEXT PRIMARY KEY,
                        user_id TEXT NOT NULL,
                        gamebase_product_id TEXT NOT NULL,
                        purchase_token TEXT NOT NULL,
                        product_seq BIGINT,
                        market_id TEXT,
                        product_type TEXT,
                        price TEXT,
                        currency TEXT,
                        payment_id TEXT,
                        is_test_purchase \(bool) NOT NULL,
                        purchase_time TEXT,
                        payload TEXT,
                        state TEXT NOT NULL CHECK (state IN ('granted', 'consumed')),
                        granted_at_ms BIGINT NOT NULL,
                        consumed_at_ms BIGINT,
                        consume_attempts INTEGER NOT NULL DEFAULT 0,
                        last_result_code INTEGER,
                        event_published_at_ms BIGINT,
                        source_topic TEXT,
                        source_partition INTEGER,
                        source_offset BIGINT,
                        sweep_claimed_until_ms BIGINT
                    )
                    """,
                    "CREATE INDEX grants_unconsumed ON grants (granted_at_ms) WHERE state = 'granted'",
                    """
                    CREATE TABLE rejections (
                        payment_seq TEXT NOT NULL,
                        user_id TEXT NOT NULL,
                        token_hash TEXT NOT NULL,
                        reason TEXT NOT NULL,
                        result_code INTEGER,
                        result_message TEXT,
                        detail TEXT,
                        event_id TEXT NOT NULL,
                        rejected_at_ms BIGINT NOT NULL,
                        source_topic TEXT,
                        source_partition INTEGER,
                        source_offset BIGINT,
                        PRIMARY KEY (payment_seq, user_id, token_hash)
                    )
                    """,
                    """
                    CREATE TABLE outbox (
                        id TEXT PRIMARY KEY,
                        payment_seq TEXT,
                        topic TEXT NOT NULL,
                        event_key \(blob),
                        headers TEXT NOT NULL,
                        payload \(blob) NOT NULL,
                        created_at_ms BIGINT NOT NULL,
                        published_at_ms BIGINT,
                        claimed_until_ms BIGINT
                    )
                    """,
                    "CREATE INDEX outbox_unpublished ON outbox (created_at_ms) WHERE published_at_ms IS NULL",
                    "CREATE INDEX outbox_payment_seq ON outbox (payment_seq)",
                ]),
            LedgerMigration(
                name: "002_reconciliation",
                sql: [
                    // How a grant's payment was found: 'message' or 'reconciliation' (NULL: granted before this
                    // column existed, always from a message).
                    "ALTER TABLE grants ADD COLUMN origin TEXT",
                    // The users of the lookback window: index-only scans of the recent grants and rejections.
                    "CREATE INDEX grants_granted_at_user ON grants (granted_at_ms, user_id)",
                    "CREATE INDEX rejections_rejected_at_user ON rejections (rejected_at_ms, reason, user_id)",
                    // When each user is next due for a check; a claim moves it one interval ahead.
                    """
                    CREATE TABLE reconcile_users (
                        user_id TEXT PRIMARY KEY,
                        next_check_ms BIGINT NOT NULL
                    )
                    """,
                    "CREATE INDEX reconcile_users_next_check ON reconcile_users (next_check_ms)",
                    // When each payment was first seen unconsumed and ungranted: the start of its grace period.
                    """
                    CREATE TABLE reconcile_sightings (
                        payment_seq TEXT PRIMARY KEY,
                        user_id TEXT NOT NULL,
                        first_seen_ms BIGINT NOT NULL
                    )
                    """,
                    "CREATE INDEX reconcile_sightings_first_seen ON reconcile_sightings (first_seen_ms)",
                ]),
        ]
    }

    static let grantColumns = """
        payment_seq, user_id, gamebase_product_id, purchase_token, product_seq, market_id, product_type, price, \
        currency, payment_id, is_test_purchase, purchase_time, payload, state, granted_at_ms, consumed_at_ms, \
        consume_attempts, last_result_code, event_published_at_ms, source_topic, source_partition, source_offset, origin
        """
    static let rejectionColumns = """
        payment_seq, user_id, token_hash, reason, result_code, result_message, detail, event_id, rejected_at_ms, \
        source_topic, source_partition, source_offset
        """
    static let outboxColumns = "id, payment_seq, topic, event_key, headers, payload, created_at_ms, published_at_ms"
}

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
                ])
        ]
    }

    static let grantColumns = """
        payment_seq, user_id, gamebase_product_id, purchase_token, product_seq, market_id, product_type, price, \
        currency, payment_id, is_test_purchase, purchase_time, payload, state, granted_at_ms, consumed_at_ms, \
        consume_attempts, last_result_code, event_published_at_ms, source_topic, source_partition, source_offset
        """
    static let rejectionColumns = """
        payment_seq, user_id, token_hash, reason, result_code, result_message, detail, event_id, rejected_at_ms, \
        source_topic, source_partition, source_offset
        """
    static let outboxColumns = "id, payment_seq, topic, event_key, headers, payload, created_at_ms, published_at_ms"
}

import Fulfilment

/// The ledger's tables, the same in SQLite and PostgreSQL but for column types.
///
/// Times are epoch milliseconds (`BIGINT`), so both stores compare them the same way.
package enum LedgerSchema {
    package enum Dialect { case sqlite, postgres }

    package static func migrations(_ dialect: Dialect) -> [LedgerMigration] {
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
            LedgerMigration(
                name: "003_support_lookup", sql: supportLookup(dialect),
                indexes: [
                    LedgerIndex("grants_payment_id", on: "grants (payment_id) WHERE payment_id IS NOT NULL"),
                    LedgerIndex("grants_user_granted_at", on: "grants (user_id, granted_at_ms)"),
                    LedgerIndex("rejections_payment_id", on: "rejections (payment_id) WHERE payment_id IS NOT NULL"),
                    LedgerIndex("rejections_user_rejected_at", on: "rejections (user_id, rejected_at_ms)"),
                    LedgerIndex("reconcile_sightings_user", on: "reconcile_sightings (user_id, first_seen_ms)"),
                ]),
            LedgerMigration(
                name: "004_retention",
                sql: [
                    // When each user last had a grant (or a confirmed rejection): the reconciler's due users are read
                    // from this table a page at a time, kept up to date from the grants written since its last scan.
                    "ALTER TABLE reconcile_users ADD COLUMN last_active_ms BIGINT",
                    // Named positions (the reconciler's scan of recent grants), shared by the instances.
                    "CREATE TABLE ledger_marks (name TEXT PRIMARY KEY, value_ms BIGINT NOT NULL)",
                ],
                indexes: [
                    LedgerIndex(
                        "outbox_published_at", on: "outbox (published_at_ms) WHERE published_at_ms IS NOT NULL"),
                    LedgerIndex("reconcile_users_due", on: "reconcile_users (next_check_ms, user_id)"),
                    LedgerIndex("dead_letters_reason_failed_at", on: "dead_letters (reason, failed_at_ms)"),
                ]),
            LedgerMigration(
                name: "005_reconcile_scan_xid", sql: reconcileScanTransaction(dialect),
                indexes: dialect == .sqlite
                    ? []
                    : [
                        LedgerIndex("grants_scan_xid", on: "grants (scan_xid) WHERE scan_xid IS NOT NULL"),
                        LedgerIndex("rejections_scan_xid", on: "rejections (scan_xid) WHERE scan_xid IS NOT NULL"),
                    ]),
            LedgerMigration(name: "006_refunds", sql: refunds(dialect)),
            // The console's refunds page: the latest refunds and their counts per day without reading every other
            // notification (Google sends one per purchase), and the users with the most revocations in a window.
            LedgerMigration(
                name: "007_refund_reports", sql: [],
                indexes: [
                    LedgerIndex(
                        "store_notifications_refunds_received",
                        on: "store_notifications (received_at_ms) WHERE \(refundKinds)"),
                    LedgerIndex("revocations_recorded", on: "revocations (recorded_at_ms)"),
                ]),
            LedgerMigration(name: "008_further_revocations", sql: furtherRevocations),
            // A grant revoked by a refund whose Consume Gamebase refuses for good is set aside: the sweeper no longer
            // retries it nor counts it as waiting for Consume (a reversal of the refund takes it back). And where a
            // refused notification last came from, to read it again. Nullable columns older instances never name, and
            // the index the sweeper counts set-aside grants by.
            LedgerMigration(
                name: "009_set_aside_and_sources",
                sql: [
                    "ALTER TABLE grants ADD COLUMN consume_set_aside_at_ms BIGINT",
                    "ALTER TABLE refused_notifications ADD COLUMN last_source TEXT",
                ],
                indexes: [
                    LedgerIndex(
                        "grants_consume_set_aside",
                        on: "grants (granted_at_ms) WHERE consume_set_aside_at_ms IS NOT NULL"),
                    // The sweeper's claim, count and oldest read past no set-aside grant (grants_unconsumed, which
                    // holds them too, stays for older instances).
                    LedgerIndex("grants_waiting_for_consume", on: "grants (granted_at_ms) WHERE \(waitingForConsume)"),
                ]),
            // The notification id a refused record claims (not believed), so `find --notification-id` finds the
            // refusal. A nullable column older instances never name, and its index.
            LedgerMigration(
                name: "010_refusal_claimed_ids",
                sql: ["ALTER TABLE refused_notifications ADD COLUMN claimed_id TEXT"],
                indexes: [
                    LedgerIndex(
                        "refused_notifications_claimed_id",
                        on: "refused_notifications (claimed_id, last_received_at_ms) WHERE claimed_id IS NOT NULL")
                ]),
        ]
    }

    /// A grant's revocations after its first (a refund after a reversal, each further partial refund), numbered 2, 3, …
    /// (``RevocationRecord/number``). The first stays in `revocations`, where older instances read it, so they run
    /// beside: they see a grant revoked once, as they always did. And a nullable column of the history positions that
    /// older instances never name.
    static let furtherRevocations = [
        """
        CREATE TABLE further_revocations (
            payment_seq TEXT NOT NULL,
            number BIGINT NOT NULL,
            user_id TEXT NOT NULL,
            store TEXT NOT NULL,
            notification_id TEXT NOT NULL,
            reason TEXT NOT NULL,
            store_reason TEXT,
            quantity BIGINT,
            revoked_at_ms BIGINT NOT NULL,
            recorded_at_ms BIGINT NOT NULL,
            reversed_by TEXT,
            reversed_at_ms BIGINT,
            PRIMARY KEY (payment_seq, number)
        )
        """,
        "CREATE INDEX further_revocations_user ON further_revocations (user_id, recorded_at_ms)",
        "CREATE INDEX further_revocations_recorded ON further_revocations (recorded_at_ms)",
        // Where a history window's pages read so far reach: a pagination token refused mid-window resumes there.
        "ALTER TABLE store_poll_marks ADD COLUMN read_through_ms BIGINT",
    ]

    /// The stores' refunds: every notification believed (once per notification id, with what it did) and the
    /// revocations (one per grant, ever; money records kept as long as grants). New tables only, so older instances run
    /// beside; they do not look for pending refunds, which the sweeper's late match then settles. On PostgreSQL, the
    /// function the grant path calls to lock its payments and read their pending refunds (``refundedPaymentsFunction``).
    static func refunds(_ dialect: Dialect) -> [String] {
        var statements = [
            """
            CREATE TABLE store_notifications (
                notification_id TEXT PRIMARY KEY,
                store TEXT NOT NULL,
                market_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                store_type TEXT NOT NULL,
                authenticity TEXT NOT NULL,
                channel TEXT NOT NULL,
                delivery_id TEXT,
                payment_id TEXT,
                purchase_token_hash TEXT,
                application TEXT,
                environment TEXT,
                product_id TEXT,
                store_reason TEXT,
                quantity BIGINT,
                occurred_at_ms BIGINT NOT NULL,
                received_at_ms BIGINT NOT NULL,
                outcome TEXT NOT NULL,
                payment_seq TEXT
            )
            """,
            "CREATE INDEX store_notifications_payment ON store_notifications (market_id, payment_id) WHERE payment_id IS NOT NULL",
            "CREATE INDEX store_notifications_pending ON store_notifications (market_id, payment_id) WHERE outcome = 'pending'",
            "CREATE INDEX store_notifications_payment_seq ON store_notifications (payment_seq) WHERE payment_seq IS NOT NULL",
            "CREATE INDEX store_notifications_received ON store_notifications (received_at_ms)",
            """
            CREATE TABLE revocations (
                payment_seq TEXT PRIMARY KEY,
                user_id TEXT NOT NULL,
                store TEXT NOT NULL,
                notification_id TEXT NOT NULL,
                reason TEXT NOT NULL,
                store_reason TEXT,
                quantity BIGINT,
                revoked_at_ms BIGINT NOT NULL,
                recorded_at_ms BIGINT NOT NULL,
                reversed_by TEXT,
                reversed_at_ms BIGINT
            )
            """,
            "CREATE INDEX revocations_user ON revocations (user_id, recorded_at_ms)",
            // Records not believed (a bad signature, another app, not JSON): one row per body, counted.
            """
            CREATE TABLE refused_notifications (
                body_hash TEXT PRIMARY KEY,
                store TEXT,
                code TEXT NOT NULL,
                detail TEXT NOT NULL,
                body_bytes BIGINT NOT NULL,
                first_received_at_ms BIGINT NOT NULL,
                last_received_at_ms BIGINT NOT NULL,
                refused_count BIGINT NOT NULL
            )
            """,
            "CREATE INDEX refused_notifications_last ON refused_notifications (last_received_at_ms)",
            "CREATE INDEX store_notifications_consumption ON store_notifications (occurred_at_ms) WHERE kind = 'consumption_request'",
            // The answers to App Store consumption requests: one row per request, each attempt's outcome.
            """
            CREATE TABLE consumption_answers (
                notification_id TEXT PRIMARY KEY,
                transaction_id TEXT NOT NULL,
                deadline_ms BIGINT NOT NULL,
                state TEXT NOT NULL,
                delivery_status TEXT,
                attempts INTEGER NOT NULL,
                last_error TEXT,
                answered_at_ms BIGINT,
                next_attempt_ms BIGINT
            )
            """,
            // Where each notification-history poller stands, and which instance polls (a lease).
            """
            CREATE TABLE store_poll_marks (
                name TEXT PRIMARY KEY,
                window_start_ms BIGINT,
                window_end_ms BIGINT,
                pagination_token TEXT,
                last_success_ms BIGINT,
                lease_owner TEXT,
                lease_until_ms BIGINT
            )
            """,
        ]
        if dialect == .postgres { statements.append(refundedPaymentsFunction) }
        return statements
    }

    /// The advisory lock class of a payment (the other key is the hash of its store code and payment id): a grant and a
    /// refund of one payment take the same lock, so neither misses the other (two-key locks never meet the one-key
    /// locks of migration and pruning, whose high halves are zero).
    static let paymentLockClass: Int32 = 0x1A9

    /// Locks the payments of a grant batch (in one order, so two batches cannot deadlock) and answers their pending
    /// refunds. `VOLATILE`, so its query takes a snapshot after the locks are held: a refund committed while the grant
    /// waited for its lock is seen (the grant statement's own snapshot, taken before, would miss it).
    static let refundedPaymentsFunction = """
        CREATE OR REPLACE FUNCTION iap_refunded_payments(markets text[], payment_ids text[])
        RETURNS TABLE (refund_market_id text, refund_payment_id text, refund_notification_id text)
        LANGUAGE plpgsql VOLATILE AS $$
        DECLARE
            lock_key integer;
        BEGIN
            FOR lock_key IN
                SELECT DISTINCT hashtext(u.m || ':' || u.p) FROM unnest(markets, payment_ids) AS u(m, p)
                WHERE u.m IS NOT NULL AND u.p IS NOT NULL ORDER BY 1
            LOOP
                PERFORM pg_advisory_xact_lock(\(paymentLockClass), lock_key);
            END LOOP;
            RETURN QUERY
                SELECT n.market_id, n.payment_id, min(n.notification_id) FROM store_notifications n
                JOIN (SELECT DISTINCT u.m, u.p FROM unnest(markets, payment_ids) AS u(m, p)) k
                  ON n.market_id = k.m AND n.payment_id = k.p
                WHERE n.outcome = 'pending'
                GROUP BY n.market_id, n.payment_id;
        END
        $$
        """

    static let notificationColumns = """
        notification_id, store, market_id, kind, store_type, authenticity, channel, delivery_id, payment_id, \
        purchase_token_hash, application, environment, product_id, store_reason, quantity, occurred_at_ms, \
        received_at_ms, outcome, payment_seq
        """
    /// The refund kinds (``StoreNotification/Kind/refunds``) as a condition on `store_notifications`: the predicate of
    /// its partial index `store_notifications_refunds_received` too, so written once.
    static let refundKinds =
        "kind IN (\(StoreNotification.Kind.refunds.map { "'\($0.rawValue)'" }.joined(separator: ", ")))"
    /// The userId of the grant a notification row was matched to, as `grant_user_id` (a select-list subquery, so the
    /// row's own columns stay unqualified).
    static let grantUserOfNotification =
        "(SELECT g.user_id FROM grants g WHERE g.payment_seq = store_notifications.payment_seq) AS grant_user_id"
    static let refusalColumns = """
        body_hash, store, code, detail, body_bytes, first_received_at_ms, last_received_at_ms, refused_count
        """
    static let revocationColumns = """
        payment_seq, user_id, store, notification_id, reason, store_reason, quantity, revoked_at_ms, recorded_at_ms, \
        reversed_by, reversed_at_ms
        """
    /// A grant's revocations, first to last, as one relation with their `number`s: the first from `revocations`, the
    /// others from `further_revocations`; `?`/`$1`-free, for a `WHERE payment_seq = …` around it.
    static let allRevocations = """
        (SELECT \(revocationColumns), 1 AS number FROM revocations \
        UNION ALL SELECT \(revocationColumns), number FROM further_revocations) AS all_revocations
        """

    /// Grants waiting for Consume: `granted`, and not set aside (a revoked grant Gamebase refused to consume).
    static let waitingForConsume = "state = 'granted' AND consume_set_aside_at_ms IS NULL"
    /// Grants set aside and still not consumed (a duplicate message's Consume may yet succeed).
    static let setAside = "consume_set_aside_at_ms IS NOT NULL AND state = 'granted'"

    /// The grant of the row `grants` names is revoked as a whole by a refund no reversal undid (partial refunds
    /// revoke units, never the grant): ``RefundPlan`` keeps every standing revocation unreversed and every other one
    /// reversed, in both tables.
    static let revokedByStandingRefund = ["revocations", "further_revocations"].map {
        """
        EXISTS (SELECT 1 FROM \($0) r WHERE r.payment_seq = grants.payment_seq \
        AND r.reason <> '\(RevocationRecord.partialRefund)' AND r.reversed_by IS NULL)
        """
    }.joined(separator: " OR ")

    /// The table a revocation numbered `number` is kept in.
    static func revocationTable(number: Int) -> String { number <= 1 ? "revocations" : "further_revocations" }

    /// The transaction that wrote each grant and rejection (`scan_xid`), so the reconciler's scan reads them in the
    /// order they became visible rather than by their stamps (``ReconcileScan``). PostgreSQL only: SQLite's one writer
    /// stamps with the clock it scans by, and nothing is added there. The column is added without a default (a volatile
    /// one would rewrite the table under its exclusive lock), then given one that only new rows take — older
    /// instances' too, which do not name it; rows written before stay NULL and are read once by time. The scan's
    /// position keeps, beside how far it got, the transactions it passed while they were still running
    /// (`ledger_marks.pending_xids`, NULL for other marks). Needs PostgreSQL 13 (`xid8`, `pg_current_xact_id`).
    static func reconcileScanTransaction(_ dialect: Dialect) -> [String] {
        guard dialect == .postgres else { return [] }
        return [
            "ALTER TABLE grants ADD COLUMN scan_xid xid8",
            "ALTER TABLE grants ALTER COLUMN scan_xid SET DEFAULT pg_current_xact_id()",
            "ALTER TABLE rejections ADD COLUMN scan_xid xid8",
            "ALTER TABLE rejections ALTER COLUMN scan_xid SET DEFAULT pg_current_xact_id()",
            "ALTER TABLE ledger_marks ADD COLUMN pending_xids BIGINT[]",
        ]
    }

    /// What `iap-worker find` reads: the message's timestamp and the duplicates counted with each grant and
    /// rejection, what Gamebase said of a rejected payment, every Consume attempt (the latest
    /// ``ConsumeAttempt/kept``, written by a trigger whenever a grant's attempt count rises, so every write path —
    /// single, batched, the sweeper's — records them) and dead letters. The indexes that find a purchase by the
    /// store's payment id or by userId are the migration's ``LedgerMigration/indexes`` (built concurrently on
    /// PostgreSQL); those of the new, empty tables are built here. Only nullable columns, a constant default and new
    /// tables: older instances keep running against it.
    static func supportLookup(_ dialect: Dialect) -> [String] {
        let bool = dialect == .sqlite ? "INTEGER" : "BOOLEAN"
        let serial = dialect == .sqlite ? "INTEGER PRIMARY KEY AUTOINCREMENT" : "BIGSERIAL PRIMARY KEY"
        let kept = ConsumeAttempt.kept
        var statements = [
            "ALTER TABLE grants ADD COLUMN source_timestamp_ms BIGINT",
            "ALTER TABLE grants ADD COLUMN duplicate_count INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE rejections ADD COLUMN source_timestamp_ms BIGINT",
            "ALTER TABLE rejections ADD COLUMN duplicate_count INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE rejections ADD COLUMN payment_id TEXT",
            "ALTER TABLE rejections ADD COLUMN verdict_product_id TEXT",
            "ALTER TABLE rejections ADD COLUMN verdict_market_id TEXT",
            "ALTER TABLE rejections ADD COLUMN verdict_price TEXT",
            "ALTER TABLE rejections ADD COLUMN verdict_currency TEXT",
            """
            CREATE TABLE consume_attempts (
                payment_seq TEXT NOT NULL,
                slot INTEGER NOT NULL,
                attempt INTEGER NOT NULL,
                result_code INTEGER,
                at_ms BIGINT NOT NULL,
                PRIMARY KEY (payment_seq, slot)
            )
            """,
            """
            CREATE TABLE dead_letters (
                id \(serial),
                payment_seq TEXT,
                user_id TEXT,
                token_hash TEXT,
                reason TEXT NOT NULL,
                error TEXT NOT NULL,
                attempts INTEGER NOT NULL,
                dlq_topic TEXT NOT NULL,
                dlq_partition INTEGER,
                dlq_offset BIGINT,
                original_topic TEXT,
                original_partition INTEGER,
                original_offset BIGINT,
                original_timestamp_ms BIGINT,
                failed_at_ms BIGINT NOT NULL,
                value_bytes INTEGER NOT NULL,
                value_omitted \(bool) NOT NULL,
                reprocess_outcome TEXT,
                reprocessed_at_ms BIGINT
            )
            """,
            "CREATE INDEX dead_letters_payment_seq ON dead_letters (payment_seq) WHERE payment_seq IS NOT NULL",
            "CREATE INDEX dead_letters_user ON dead_letters (user_id, failed_at_ms) WHERE user_id IS NOT NULL",
            "CREATE INDEX dead_letters_location ON dead_letters (dlq_topic, dlq_partition, dlq_offset)",
            "CREATE INDEX dead_letters_original ON dead_letters (original_topic, original_partition, original_offset)",
            "CREATE INDEX dead_letters_failed_at ON dead_letters (failed_at_ms)",
        ]
        switch dialect {
        case .sqlite:
            statements.append(
                """
                CREATE TRIGGER grants_consume_attempt AFTER UPDATE OF consume_attempts ON grants
                WHEN NEW.consume_attempts > OLD.consume_attempts AND NEW.state = 'granted'
                BEGIN
                    INSERT OR REPLACE INTO consume_attempts (payment_seq, slot, attempt, result_code, at_ms)
                    VALUES (
                        NEW.payment_seq, NEW.consume_attempts % \(kept), NEW.consume_attempts, NEW.last_result_code,
                        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER));
                END
                """)
        case .postgres:
            statements.append(
                """
                CREATE OR REPLACE FUNCTION iap_record_consume_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF NEW.consume_attempts > OLD.consume_attempts AND NEW.state = 'granted' THEN
                        INSERT INTO consume_attempts (payment_seq, slot, attempt, result_code, at_ms)
                        VALUES (
                            NEW.payment_seq, NEW.consume_attempts % \(kept), NEW.consume_attempts, NEW.last_result_code,
                            (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                        ON CONFLICT (payment_seq, slot) DO UPDATE SET attempt = EXCLUDED.attempt,
                            result_code = EXCLUDED.result_code, at_ms = EXCLUDED.at_ms;
                    END IF;
                    RETURN NULL;
                END
                $$
                """)
            statements.append(
                """
                CREATE TRIGGER grants_consume_attempt AFTER UPDATE OF consume_attempts ON grants
                FOR EACH ROW EXECUTE FUNCTION iap_record_consume_attempt()
                """)
        }
        return statements
    }

    static let grantColumns = """
        payment_seq, user_id, gamebase_product_id, purchase_token, product_seq, market_id, product_type, price, \
        currency, payment_id, is_test_purchase, purchase_time, payload, state, granted_at_ms, consumed_at_ms, \
        consume_attempts, last_result_code, event_published_at_ms, source_topic, source_partition, source_offset, origin, \
        source_timestamp_ms
        """
    static let rejectionColumns = """
        payment_seq, user_id, token_hash, reason, result_code, result_message, detail, event_id, rejected_at_ms, \
        source_topic, source_partition, source_offset, source_timestamp_ms, payment_id, verdict_product_id, \
        verdict_market_id, verdict_price, verdict_currency
        """
    static let deadLetterColumns = """
        payment_seq, user_id, token_hash, reason, error, attempts, dlq_topic, dlq_partition, dlq_offset, original_topic, \
        original_partition, original_offset, original_timestamp_ms, failed_at_ms, value_bytes, value_omitted, \
        reprocess_outcome, reprocessed_at_ms
        """
    static let outboxColumns = "id, payment_seq, topic, event_key, headers, payload, created_at_ms, published_at_ms"
}

import Foundation
import Fulfilment
import Logging
import PostgresNIO
import Wire

/// Batches on PostgreSQL: one statement (one round trip, one implicit transaction) for many purchases. The rows go
/// in as one JSON array expanded by `jsonb_to_recordset`, which carries NULLs and any count of rows in a single
/// parameter; binary values travel as base64.
extension PostgresLedgerStore {
    /// A value for an `integer` column, clamped: a result code comes from Gamebase's answer and may be any Int64.
    static func integerColumn(_ value: Int) -> Int { Int(Int32(clamping: value)) }

    public func lookup(_ keys: [RejectionKey]) async throws -> [LedgerLookup] {
        guard !keys.isEmpty else { return [] }
        return try await wrap {
            let paymentSeqs = keys.map(\.paymentSeq)
            // Keyed by bytes: String keys would merge canonically equivalent identifiers.
            var grants: [[UInt8]: GrantRecord] = [:]
            for try await row in try await client.query(
                "SELECT \(unescaped: LedgerSchema.grantColumns) FROM grants WHERE payment_seq = ANY(\(paymentSeqs))",
                logger: logger)
            {
                let grant = try Self.grant(from: row)
                grants[Array(grant.paymentSeq.utf8)] = grant
            }
            var rejections: [[UInt8]: RejectionRecord] = [:]
            let rows = try await client.query(
                """
                SELECT \(unescaped: LedgerSchema.rejectionColumns) FROM rejections
                JOIN unnest(\(keys.map(\.paymentSeq)), \(keys.map(\.userId)), \(keys.map(\.tokenHash))) AS k(payment_seq, user_id, token_hash)
                USING (payment_seq, user_id, token_hash)
                """, logger: logger)
            for try await row in rows {
                let rejection = try Self.rejection(from: row)
                rejections[Self.keyBytes(rejection.key.paymentSeq, rejection.key.userId, rejection.key.tokenHash)] =
                    rejection
            }
            return keys.map { key in
                LedgerLookup(
                    grant: grants[Array(key.paymentSeq.utf8)],
                    rejection: rejections[Self.keyBytes(key.paymentSeq, key.userId, key.tokenHash)])
            }
        }
    }

    public func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult] {
        guard !writes.isEmpty else { return [] }
        let rows = Self.jsonArray(writes) { object, write in
            let g = write.grant
            let e = write.event
            object.string("payment_seq", g.paymentSeq)
            object.string("user_id", g.userId)
            object.string("gamebase_product_id", g.gamebaseProductId)
            object.string("purchase_token", g.purchaseToken)
            object.integer("product_seq", g.productSeq)
            object.string("market_id", g.marketId)
            object.string("product_type", g.productType)
            object.string("price", g.price)
            object.string("currency", g.currency)
            object.string("payment_id", g.paymentId)
            object.bool("is_test_purchase", g.isTestPurchase)
            object.string("purchase_time", g.purchaseTime)
            object.string("payload", g.payload)
            object.string("state", g.state.rawValue)
            object.integer("granted_at_ms", g.grantedAt.epochMilliseconds)
            object.integer("consumed_at_ms", g.consumedAt?.epochMilliseconds)
            object.integer("consume_attempts", Self.integerColumn(g.consumeAttempts))
            object.integer("last_result_code", g.lastResultCode.map(Self.integerColumn))
            object.integer("event_published_at_ms", g.eventPublishedAt?.epochMilliseconds)
            object.string("source_topic", g.source?.topic)
            object.integer("source_partition", g.source?.partition)
            object.integer("source_offset", g.source?.offset)
            object.string("origin", g.origin.rawValue)
            object.integer("source_timestamp_ms", g.messageTimestampMilliseconds)
            Self.writeEvent(e, to: &object)
        }
        return try await wrap {
            // The leading comment names the statement where pg_stat_activity shows only its first 1 kB (an operator's
            // view, and the batch-crash test's probe).
            let inserted = try await client.query(
                """
                -- iap-worker: grant batch (INSERT INTO grants)
                WITH input AS (
                    SELECT * FROM jsonb_to_recordset(\(rows)::jsonb) AS t(
                        payment_seq text, user_id text, gamebase_product_id text, purchase_token text, product_seq bigint,
                        market_id text, product_type text, price text, currency text, payment_id text, is_test_purchase boolean,
                        purchase_time text, payload text, state text, granted_at_ms bigint, consumed_at_ms bigint,
                        consume_attempts integer, last_result_code integer, event_published_at_ms bigint, source_topic text,
                        source_partition integer, source_offset bigint, origin text, source_timestamp_ms bigint,
                        \(unescaped: Self.eventColumns))
                ),
                -- Locks the batch's payments and reads their pending refunds after the locks (see the function).
                refunded AS (
                    SELECT r.* FROM (SELECT array_agg(market_id) AS m, array_agg(payment_id) AS p FROM input) a,
                    LATERAL iap_refunded_payments(a.m, a.p) r
                ),
                granted AS (
                    INSERT INTO grants (\(unescaped: LedgerSchema.grantColumns))
                    SELECT \(unescaped: LedgerSchema.grantColumns) FROM input i
                    WHERE NOT EXISTS (
                        SELECT 1 FROM refunded r
                        WHERE r.refund_market_id = i.market_id AND r.refund_payment_id = i.payment_id)
                    ON CONFLICT (payment_seq) DO NOTHING
                    RETURNING payment_seq
                ),
                events AS (
                    INSERT INTO outbox (\(unescaped: LedgerSchema.outboxColumns))
                    SELECT \(unescaped: Self.eventSelection) FROM input i JOIN granted g ON g.payment_seq = i.payment_seq
                    ON CONFLICT (id) DO NOTHING
                )
                SELECT payment_seq, NULL, NULL, NULL FROM granted
                UNION ALL
                SELECT NULL, refund_market_id, refund_payment_id, refund_notification_id FROM refunded
                """, logger: logger)
            var granted: [[UInt8]: Int] = [:]
            // Keyed by bytes, as the database compares them.
            var refunded: [[UInt8]: String] = [:]
            for try await (paymentSeq, market, paymentId, notification) in inserted.decode(
                (String?, String?, String?, String?).self)
            {
                if let paymentSeq { granted[Array(paymentSeq.utf8), default: 0] += 1 }
                if let market, let paymentId, let notification {
                    refunded[Array(market.utf8) + [0] + Array(paymentId.utf8)] = notification
                }
            }
            // The first write of each inserted paymentSeq is the one that went in; the others are answered with it.
            var results: [GrantInsertResult?] = []
            var losers: [String] = []
            for write in writes {
                let bytes = Array(write.grant.paymentSeq.utf8)
                if let left = granted[bytes], left > 0 {
                    granted[bytes] = left - 1
                    results.append(.inserted)
                } else {
                    results.append(nil)
                    losers.append(write.grant.paymentSeq)
                }
            }
            guard !losers.isEmpty else { return results.map { $0 ?? .inserted } }
            var existing: [[UInt8]: GrantRecord] = [:]
            for try await row in try await client.query(
                "SELECT \(unescaped: LedgerSchema.grantColumns) FROM grants WHERE payment_seq = ANY(\(losers))",
                logger: logger)
            {
                let grant = try Self.grant(from: row)
                existing[Array(grant.paymentSeq.utf8)] = grant
            }
            return try zip(writes, results).map { write, result in
                if let result { return result }
                // A grant that exists answers first; then a refund kept before the grant.
                if existing[Array(write.grant.paymentSeq.utf8)] == nil, let key = StorePaymentKey(write.grant),
                    let notification = refunded[Array(key.marketId.utf8) + [0] + Array(key.paymentId.utf8)]
                {
                    return .refunded(notificationId: notification)
                }
                guard let grant = existing[Array(write.grant.paymentSeq.utf8)] else {
                    throw LedgerError(
                        code: .conflict, message: "grant \(write.grant.paymentSeq) conflicted but cannot be read")
                }
                return .alreadyGranted(grant)
            }
        }
    }

    public func insertRejections(_ writes: [RejectionWrite]) async throws -> [Bool] {
        guard !writes.isEmpty else { return [] }
        let rows = Self.jsonArray(writes) { object, write in
            let r = write.rejection
            object.string("payment_seq", r.key.paymentSeq)
            object.string("user_id", r.key.userId)
            object.string("token_hash", r.key.tokenHash)
            object.string("reason", r.reason)
            object.integer("result_code", r.resultCode.map(Self.integerColumn))
            object.string("result_message", r.resultMessage)
            object.string("detail", r.detail)
            object.string("event_id", r.eventID)
            object.integer("rejected_at_ms", r.rejectedAt.epochMilliseconds)
            object.string("source_topic", r.source?.topic)
            object.integer("source_partition", r.source?.partition)
            object.integer("source_offset", r.source?.offset)
            object.integer("source_timestamp_ms", r.messageTimestampMilliseconds)
            object.string("payment_id", r.verdict?.paymentId)
            object.string("verdict_product_id", r.verdict?.gamebaseProductId)
            object.string("verdict_market_id", r.verdict?.marketId)
            object.string("verdict_price", r.verdict?.price)
            object.string("verdict_currency", r.verdict?.currency)
            Self.writeEvent(write.event, to: &object)
        }
        return try await wrap {
            let inserted = try await client.query(
                """
                WITH input AS (
                    SELECT * FROM jsonb_to_recordset(\(rows)::jsonb) AS t(
                        payment_seq text, user_id text, token_hash text, reason text, result_code integer, result_message text,
                        detail text, event_id text, rejected_at_ms bigint, source_topic text, source_partition integer,
                        source_offset bigint, source_timestamp_ms bigint, payment_id text, verdict_product_id text,
                        verdict_market_id text, verdict_price text, verdict_currency text, \(unescaped: Self.eventColumns))
                ),
                inserted AS (
                    INSERT INTO rejections (\(unescaped: LedgerSchema.rejectionColumns))
                    SELECT \(unescaped: LedgerSchema.rejectionColumns) FROM input
                    ON CONFLICT DO NOTHING
                    RETURNING payment_seq, user_id, token_hash
                ),
                events AS (
                    INSERT INTO outbox (\(unescaped: LedgerSchema.outboxColumns))
                    SELECT \(unescaped: Self.eventSelection) FROM input i
                    JOIN inserted r ON r.payment_seq = i.payment_seq AND r.user_id = i.user_id AND r.token_hash = i.token_hash
                    ON CONFLICT (id) DO NOTHING
                )
                SELECT payment_seq, user_id, token_hash FROM inserted
                """, logger: logger)
            var written: [[UInt8]: Int] = [:]
            for try await (paymentSeq, userId, tokenHash) in inserted.decode((String, String, String).self) {
                written[Self.keyBytes(paymentSeq, userId, tokenHash), default: 0] += 1
            }
            return writes.map { write in
                let key = Self.keyBytes(
                    write.rejection.key.paymentSeq, write.rejection.key.userId, write.rejection.key.tokenHash)
                guard let left = written[key], left > 0 else { return false }
                written[key] = left - 1
                return true
            }
        }
    }

    public func recordConsumes(_ records: [ConsumeRecord]) async throws -> [Bool] {
        guard !records.isEmpty else { return [] }
        let rows = Self.jsonArray(records) { object, record in
            object.string("payment_seq", record.paymentSeq)
            object.bool("consumed", record.consumed)
            object.integer("result_code", record.resultCode.map(Self.integerColumn))
            object.integer("at_ms", record.at.epochMilliseconds)
            object.string("published_event_id", record.publishedEventID)
        }
        return try await wrap {
            // One UPDATE per table and row set: a statement must not update a row twice.
            let updated = try await client.query(
                """
                WITH input AS (
                    SELECT * FROM jsonb_to_recordset(\(rows)::jsonb) AS t(
                        payment_seq text, consumed boolean, result_code integer, at_ms bigint, published_event_id text)
                ),
                -- One outcome per grant (an UPDATE applies one of several matching rows, and which is not defined):
                -- a Consume that succeeded wins over a failed attempt reported by the sweeper in the same batch.
                decisive AS (
                    SELECT DISTINCT ON (payment_seq) * FROM input ORDER BY payment_seq, consumed DESC, at_ms
                ),
                published AS (
                    UPDATE outbox o SET published_at_ms = i.at_ms, claimed_until_ms = NULL
                    FROM input i WHERE o.id = i.published_event_id AND o.published_at_ms IS NULL
                ),
                settled AS (
                    UPDATE grants g SET
                        event_published_at_ms = COALESCE(g.event_published_at_ms, i.at_ms)
                    FROM input i
                    WHERE g.payment_seq = i.payment_seq AND g.state <> 'granted' AND g.event_published_at_ms IS NULL
                      AND i.published_event_id LIKE '%:item-granted'
                ),
                updated AS (
                    UPDATE grants g SET
                        state = CASE WHEN i.consumed THEN 'consumed' ELSE g.state END,
                        consumed_at_ms = CASE WHEN i.consumed THEN i.at_ms ELSE g.consumed_at_ms END,
                        last_result_code = i.result_code,
                        consume_attempts = g.consume_attempts + 1,
                        sweep_claimed_until_ms = CASE WHEN i.consumed THEN NULL ELSE g.sweep_claimed_until_ms END,
                        event_published_at_ms = CASE WHEN i.published_event_id LIKE '%:item-granted'
                            THEN COALESCE(g.event_published_at_ms, i.at_ms) ELSE g.event_published_at_ms END
                    FROM decisive i
                    WHERE g.payment_seq = i.payment_seq AND g.state = 'granted'
                    RETURNING g.payment_seq, i.consumed
                )
                SELECT payment_seq FROM updated WHERE consumed
                """, logger: logger)
            var consumed: Set<[UInt8]> = []
            for try await paymentSeq in updated.decode(String.self) { consumed.insert(Array(paymentSeq.utf8)) }
            // A paymentSeq consumed twice in one batch: the first answer is true, the second false (as in turn).
            return records.map { record in
                guard record.consumed else { return false }
                return consumed.remove(Array(record.paymentSeq.utf8)) != nil
            }
        }
    }

    public func markPublished(_ events: [PublishedEvent]) async throws {
        guard !events.isEmpty else { return }
        let rows = Self.jsonArray(events) { object, event in
            object.string("id", event.id)
            object.integer("at_ms", event.at.epochMilliseconds)
        }
        try await wrap {
            try await client.query(
                """
                WITH input AS (SELECT * FROM jsonb_to_recordset(\(rows)::jsonb) AS t(id text, at_ms bigint)),
                published AS (
                    UPDATE outbox o SET published_at_ms = i.at_ms, claimed_until_ms = NULL
                    FROM input i WHERE o.id = i.id AND o.published_at_ms IS NULL
                )
                UPDATE grants g SET event_published_at_ms = i.at_ms
                FROM input i JOIN outbox o ON o.id = i.id
                WHERE g.payment_seq = o.payment_seq AND g.event_published_at_ms IS NULL AND i.id LIKE '%:item-granted'
                """, logger: logger)
        }
    }

    // MARK: Encoding

    /// The outbox columns of a batch row (prefixed `ev_`), as `jsonb_to_recordset` declares them.
    static let eventColumns = """
        ev_id text, ev_topic text, ev_key text, ev_headers text, ev_payload text, ev_created_at_ms bigint,
        ev_published_at_ms bigint
        """

    /// The outbox row of a batch row, in `LedgerSchema.outboxColumns` order.
    static let eventSelection = """
        i.ev_id, i.payment_seq, i.ev_topic, decode(i.ev_key, 'base64'), i.ev_headers, decode(i.ev_payload, 'base64'), \
        i.ev_created_at_ms, i.ev_published_at_ms
        """

    static func writeEvent(_ event: OutboxEvent, to object: inout JSONObject) {
        object.string("ev_id", event.id)
        object.string("ev_topic", event.topic)
        object.string("ev_key", event.key.map { Data($0).base64EncodedString() })
        object.string("ev_headers", LedgerCoding.encodeHeaders(event.headers))
        object.string("ev_payload", Data(event.payload).base64EncodedString())
        object.integer("ev_created_at_ms", event.createdAt.epochMilliseconds)
        // Written as given, as the SQLite store does (the flow's events are unpublished; tools and tests may not be).
        object.integer("ev_published_at_ms", event.publishedAt?.epochMilliseconds)
    }

    /// A JSON array with one object per element.
    static func jsonArray<Element>(_ elements: [Element], _ write: (inout JSONObject, Element) -> Void) -> String {
        var text = "["
        text.reserveCapacity(elements.count * 512)
        for (index, element) in elements.enumerated() {
            if index > 0 { text += "," }
            JSONText.appendObject(to: &text) { object in write(&object, element) }
        }
        return text + "]"
    }

    static func keyBytes(_ paymentSeq: String, _ userId: String, _ tokenHash: String) -> [UInt8] {
        Array(paymentSeq.utf8) + [0] + Array(userId.utf8) + [0] + Array(tokenHash.utf8)
    }

}

import Foundation
import Fulfilment
import Logging
import PostgresNIO
import ServiceLifecycle
import Wire

/// The shared ledger: PostgreSQL through postgres-nio, for many worker instances.
///
/// TLS follows the URL's `sslmode` (``PostgresSSLMode``): the pool requires TLS whenever the mode encrypts and never
/// falls back to an unencrypted connection.
///
/// - Important: Its connection pool runs in ``run()``: run the store as a `Service` (or in a task) before use.
public final class PostgresLedgerStore: SQLLedgerStore, Service {
    let client: PostgresClient
    let logger: Logger
    let url: PostgresLedgerURL
    /// The TLS mode of the start-up check's single connection: the pool's, as a ready context.
    let connectionTLS: PostgresConnection.Configuration.TLS
    /// The pool's connect timeout, also the start-up check's.
    static let connectTimeout: Duration = .seconds(10)
    /// Serialises the schema migrations of concurrently starting workers.
    static let migrationLockID: Int64 = 0x1A9_0001

    /// - Throws: ``LedgerError`` with code `configuration` when `sslrootcert` cannot be read.
    public init(url: PostgresLedgerURL, maxConnections: Int = 20, logger: Logger) throws(LedgerError) {
        var configuration = PostgresClient.Configuration(
            host: url.host, port: url.port, username: url.username, password: url.password, database: url.database,
            tls: try url.clientTLS())
        configuration.options.maximumConnections = maxConnections
        configuration.options.connectionIdleTimeout = .seconds(60)
        configuration.options.connectTimeout = Self.connectTimeout
        self.connectionTLS = try url.connectionTLS()
        self.client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.logger = logger
        self.url = url
    }

    /// Runs the connection pool until the task is cancelled.
    public func run() async throws {
        await client.run()
    }

    public func migrate() async throws {
        do {
            try await migrateSchema()
            try await buildIndexes()
        } catch {
            if let error = Self.unwrapped(error) as? LedgerError { throw error }
            throw LedgerError(
                code: .migration,
                message: "migrating the PostgreSQL ledger failed: \(Self.describe(Self.unwrapped(error)))")
        }
    }

    public func grant(paymentSeq: String) async throws -> GrantRecord? {
        try await wrap {
            let rows = try await client.query(
                "SELECT \(unescaped: LedgerSchema.grantColumns) FROM grants WHERE payment_seq = \(paymentSeq)",
                logger: logger)
            for try await row in rows { return try Self.grant(from: row) }
            return nil
        }
    }

    public func event(id: String) async throws -> OutboxEvent? {
        try await wrap {
            let rows = try await client.query(
                "SELECT \(unescaped: LedgerSchema.outboxColumns) FROM outbox WHERE id = \(id)", logger: logger)
            for try await row in rows { return try Self.event(from: row) }
            return nil
        }
    }

    public func claimUnconsumedGrants(grantedBefore: Date, limit: Int, lease: Duration, now: Date) async throws
        -> [GrantRecord]
    {
        let nowMs = now.epochMilliseconds
        let until = nowMs + Int64(lease.components.seconds * 1000)
        let beyond = LeaseEnd.latest(now: nowMs, until: until)
        return try await wrap {
            let rows = try await client.query(
                """
                UPDATE grants SET sweep_claimed_until_ms = \(until)
                WHERE payment_seq IN (
                    SELECT payment_seq FROM grants
                    WHERE \(unescaped: LedgerSchema.waitingForConsume)
                      AND granted_at_ms < \(grantedBefore.epochMilliseconds)
                      AND (sweep_claimed_until_ms IS NULL OR sweep_claimed_until_ms < \(nowMs)
                           OR sweep_claimed_until_ms > \(beyond))
                    ORDER BY granted_at_ms LIMIT \(Int64(limit))
                    FOR UPDATE SKIP LOCKED)
                RETURNING \(unescaped: LedgerSchema.grantColumns)
                """, logger: logger)
            var grants: [GrantRecord] = []
            for try await row in rows { grants.append(try Self.grant(from: row)) }
            return grants
        }
    }

    public func claimUnpublishedEvents(createdBefore: Date, limit: Int, lease: Duration, now: Date) async throws
        -> [OutboxEvent]
    {
        let nowMs = now.epochMilliseconds
        let until = nowMs + Int64(lease.components.seconds * 1000)
        let beyond = LeaseEnd.latest(now: nowMs, until: until)
        return try await wrap {
            let rows = try await client.query(
                """
                UPDATE outbox SET claimed_until_ms = \(until)
                WHERE id IN (
                    SELECT id FROM outbox
                    WHERE published_at_ms IS NULL AND created_at_ms < \(createdBefore.epochMilliseconds)
                      AND (claimed_until_ms IS NULL OR claimed_until_ms < \(nowMs) OR claimed_until_ms > \(beyond))
                    ORDER BY created_at_ms LIMIT \(Int64(limit))
                    FOR UPDATE SKIP LOCKED)
                RETURNING \(unescaped: LedgerSchema.outboxColumns)
                """, logger: logger)
            var events: [OutboxEvent] = []
            for try await row in rows { events.append(try Self.event(from: row)) }
            return events
        }
    }

    public func rejections(paymentSeq: String) async throws -> [RejectionRecord] {
        try await wrap {
            let rows = try await client.query(
                "SELECT \(unescaped: LedgerSchema.rejectionColumns) FROM rejections WHERE payment_seq = \(paymentSeq) ORDER BY rejected_at_ms",
                logger: logger)
            var result: [RejectionRecord] = []
            for try await row in rows { result.append(try Self.rejection(from: row)) }
            return result
        }
    }

    public func events(paymentSeq: String) async throws -> [OutboxEvent] {
        try await wrap {
            let rows = try await client.query(
                "SELECT \(unescaped: LedgerSchema.outboxColumns) FROM outbox WHERE payment_seq = \(paymentSeq) ORDER BY created_at_ms, id",
                logger: logger)
            var result: [OutboxEvent] = []
            for try await row in rows { result.append(try Self.event(from: row)) }
            return result
        }
    }

    public func stats() async throws -> LedgerStats {
        try await wrap {
            var granted = 0
            var consumed = 0
            for try await (state, count) in try await client.query(
                "SELECT state, COUNT(*) FROM grants GROUP BY state", logger: logger
            )
            .decode((String, Int64).self) {
                if state == "granted" { granted = Int(count) } else { consumed = Int(count) }
            }
            var rejections: [String: Int] = [:]
            for try await (reason, count) in try await client.query(
                "SELECT reason, COUNT(*) FROM rejections GROUP BY reason", logger: logger
            ).decode((String, Int64).self) {
                rejections[reason] = Int(count)
            }
            var unpublished = 0
            for try await count in try await client.query(
                "SELECT COUNT(*) FROM outbox WHERE published_at_ms IS NULL", logger: logger
            ).decode(Int64.self) {
                unpublished = Int(count)
            }
            return LedgerStats(
                granted: granted, consumed: consumed, rejections: rejections, unpublishedEvents: unpublished)
        }
    }

    public func countUnconsumed() async throws -> Int {
        try await wrap {
            // The probe of the ledger: a server that answers reads but takes no writes (a standby the pool still
            // points at after a failover, a database set read-only) is not a ledger the flow can use.
            let rows: PostgresRowSequence
            do {
                rows = try await client.query(
                    """
                    SELECT COUNT(*), current_setting('transaction_read_only') FROM grants
                    WHERE \(unescaped: LedgerSchema.waitingForConsume)
                    """, logger: logger)
            } catch  where Self.namesAMissingColumn(error) {
                // A ledger not migrated to 009 yet (`check-config` migrates nothing).
                throw LedgerError(code: .missingTable, message: "PostgreSQL: \(Self.describe(error))")
            }
            for try await (count, readOnly) in rows.decode((Int64, String).self) {
                guard readOnly == "off" else {
                    throw LedgerError(
                        code: .unwritable,
                        message: "read-only (the server takes no writes); PostgreSQL: transaction_read_only is on")
                }
                return Int(count)
            }
            return 0
        }
    }

    public func oldestUnconsumedGrantedAt() async throws -> Date? {
        try await wrap {
            for try await oldest in try await client.query(
                "SELECT MIN(granted_at_ms) FROM grants WHERE \(unescaped: LedgerSchema.waitingForConsume)",
                logger: logger
            ).decode(Int64?.self) {
                return oldest.map(Date.init(epochMilliseconds:))
            }
            return nil
        }
    }

    public func countSetAside() async throws -> Int {
        try await wrap {
            for try await count in try await client.query(
                "SELECT COUNT(*) FROM grants WHERE \(unescaped: LedgerSchema.setAside)", logger: logger
            ).decode(Int64.self) {
                return Int(count)
            }
            return 0
        }
    }

    public func resumeSetAsideGrants() async throws -> Int {
        try await wrap {
            let rows = try await client.query(
                """
                UPDATE grants SET consume_set_aside_at_ms = NULL
                WHERE \(unescaped: LedgerSchema.setAside) AND NOT (\(unescaped: LedgerSchema.revokedByStandingRefund))
                RETURNING payment_seq
                """, logger: logger)
            var resumed = 0
            for try await _ in rows.decode(String.self) { resumed += 1 }
            return resumed
        }
    }

    public func setAsideRevokedGrant(paymentSeq: String, at date: Date) async throws -> Bool {
        try await wrap {
            let rows = try await client.query(
                """
                UPDATE grants SET consume_set_aside_at_ms = \(date.epochMilliseconds)
                WHERE payment_seq = \(paymentSeq) AND \(unescaped: LedgerSchema.waitingForConsume)
                  AND (\(unescaped: LedgerSchema.revokedByStandingRefund))
                RETURNING payment_seq
                """, logger: logger)
            for try await _ in rows.decode(String.self) { return true }
            return false
        }
    }

    /// Nothing to do: the pool closes when ``run()``'s task ends.
    public func close() async throws {}

    // MARK: The probe

    public func probeWrite() async throws {
        try await wrap {
            try await client.query(
                """
                INSERT INTO ledger_marks (name, value_ms) VALUES ('write_probe', \(Date().epochMilliseconds))
                ON CONFLICT (name) DO UPDATE SET value_ms = excluded.value_ms
                """, logger: logger)
        }
    }

    /// The server's disk is not this host's to measure: its fullness shows as `53100` on a write.
    public func storageShortfall() -> LedgerError? { nil }

    // MARK: Helpers

    @discardableResult
    func wrap<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as LedgerError {
            throw error
        } catch {
            throw Self.ledgerError(error)
        }
    }

    /// A server's error as the ledger's, its kind decided by its SQLSTATE: the storage's and the server's inability
    /// to write are `unwritable`, an outage; a table an older version migrated is `missingTable`; the rest are this
    /// statement's.
    static func ledgerError(_ error: any Error) -> LedgerError {
        // A ledger error thrown inside a transaction comes back wrapped by postgres-nio: it keeps its kind.
        if let error = unwrapped(error) as? LedgerError { return error }
        let state = sqlState(of: error) ?? ""
        if let condition = storageCondition(sqlState: state) {
            return LedgerError(code: .unwritable, message: "\(condition); PostgreSQL: \(describe(error))")
        }
        // 42P01 undefined_table, 42883 undefined_function: a ledger an older version migrated.
        let missing = ["42P01", "42883"].contains(state)
        return LedgerError(code: missing ? .missingTable : .query, message: "PostgreSQL: \(describe(error))")
    }

    /// 42703 undefined_column: a column a newer migration adds (009's set-aside), read by a tool that migrates nothing
    /// (`find`, `check-config`) before the worker migrated the ledger.
    static func namesAMissingColumn(_ error: any Error) -> Bool {
        sqlState(of: error) == "42703"
    }

    /// What a SQLSTATE says of the server's ability to write, `nil` for a statement's own failure.
    static func storageCondition(sqlState: String) -> String? {
        switch sqlState {
        case "53100": "disk full (the server's)"
        case "53200": "out of memory (the server's)"
        case "58030": "I/O error (the server's)"
        case "25006": "read-only (the server takes no writes)"
        default: nil
        }
    }

    /// The server's message and SQLSTATE, never the query's bound values (they can hold purchase tokens).
    static func describe(_ error: any Error) -> String {
        if let error = unwrapped(error) as? PSQLError {
            if let message = error.serverInfo?[.message] {
                return "\(error.serverInfo?[.sqlState] ?? "") \(message)"
            }
            return "\(error.code)"
        }
        return "\(type(of: error))"
    }

    static func insert(_ event: OutboxEvent, _ connection: PostgresConnection, _ logger: Logger) async throws {
        let e = event
        try await connection.query(
            """
            INSERT INTO outbox (\(unescaped: LedgerSchema.outboxColumns)) VALUES (
                \(e.id), \(e.paymentSeq), \(e.topic), \(e.key.map { Data($0) }), \(LedgerCoding.encodeHeaders(e.headers)),
                \(Data(e.payload)), \(e.createdAt.epochMilliseconds), \(e.publishedAt?.epochMilliseconds))
            ON CONFLICT (id) DO NOTHING
            """, logger: logger)
    }

    static func source(_ row: PostgresRandomAccessRow) throws -> MessageSource? {
        guard let topic = try row["source_topic"].decode(String?.self) else { return nil }
        return MessageSource(
            topic: topic, partition: try row["source_partition"].decode(Int32?.self) ?? -1,
            offset: try row["source_offset"].decode(Int64?.self) ?? -1)
    }

    static func grant(from row: PostgresRow) throws -> GrantRecord {
        let r = row.makeRandomAccess()
        return GrantRecord(
            paymentSeq: try r["payment_seq"].decode(String.self), userId: try r["user_id"].decode(String.self),
            gamebaseProductId: try r["gamebase_product_id"].decode(String.self),
            purchaseToken: try r["purchase_token"].decode(String.self),
            productSeq: try r["product_seq"].decode(Int64?.self),
            marketId: try r["market_id"].decode(String?.self), productType: try r["product_type"].decode(String?.self),
            price: try r["price"].decode(String?.self), currency: try r["currency"].decode(String?.self),
            paymentId: try r["payment_id"].decode(String?.self),
            isTestPurchase: try r["is_test_purchase"].decode(Bool.self),
            purchaseTime: try r["purchase_time"].decode(String?.self), payload: try r["payload"].decode(String?.self),
            state: GrantState(rawValue: try r["state"].decode(String.self)) ?? .granted,
            grantedAt: Date(epochMilliseconds: try r["granted_at_ms"].decode(Int64.self)),
            consumedAt: try r["consumed_at_ms"].decode(Int64?.self).map(Date.init(epochMilliseconds:)),
            consumeAttempts: Int(try r["consume_attempts"].decode(Int32.self)),
            lastResultCode: try r["last_result_code"].decode(Int32?.self).map(Int.init),
            eventPublishedAt: try r["event_published_at_ms"].decode(Int64?.self).map(Date.init(epochMilliseconds:)),
            source: try source(r),
            origin: try r["origin"].decode(String?.self).flatMap(PurchaseOrigin.init(rawValue:)) ?? .message,
            messageTimestampMilliseconds: try r["source_timestamp_ms"].decode(Int64?.self))
    }

    static func rejection(from row: PostgresRow) throws -> RejectionRecord {
        let r = row.makeRandomAccess()
        return RejectionRecord(
            key: RejectionKey(
                paymentSeq: try r["payment_seq"].decode(String.self), userId: try r["user_id"].decode(String.self),
                tokenHash: try r["token_hash"].decode(String.self)),
            reason: try r["reason"].decode(String.self),
            resultCode: try r["result_code"].decode(Int32?.self).map(Int.init),
            resultMessage: try r["result_message"].decode(String?.self), detail: try r["detail"].decode(String?.self),
            eventID: try r["event_id"].decode(String.self),
            rejectedAt: Date(epochMilliseconds: try r["rejected_at_ms"].decode(Int64.self)), source: try source(r),
            messageTimestampMilliseconds: try r["source_timestamp_ms"].decode(Int64?.self), verdict: try verdict(r))
    }

    static func verdict(_ r: PostgresRandomAccessRow) throws -> PaymentVerdict? {
        let verdict = PaymentVerdict(
            paymentId: try r["payment_id"].decode(String?.self),
            gamebaseProductId: try r["verdict_product_id"].decode(String?.self),
            marketId: try r["verdict_market_id"].decode(String?.self),
            price: try r["verdict_price"].decode(String?.self),
            currency: try r["verdict_currency"].decode(String?.self))
        return verdict == PaymentVerdict() ? nil : verdict
    }

    static func event(from row: PostgresRow) throws -> OutboxEvent {
        let r = row.makeRandomAccess()
        return OutboxEvent(
            id: try r["id"].decode(String.self), paymentSeq: try r["payment_seq"].decode(String?.self),
            topic: try r["topic"].decode(String.self), key: try r["event_key"].decode(Data?.self).map { Array($0) },
            headers: LedgerCoding.decodeHeaders(try r["headers"].decode(String.self)),
            payload: Array(try r["payload"].decode(Data.self)),
            createdAt: Date(epochMilliseconds: try r["created_at_ms"].decode(Int64.self)),
            publishedAt: try r["published_at_ms"].decode(Int64?.self).map(Date.init(epochMilliseconds:)))
    }
}

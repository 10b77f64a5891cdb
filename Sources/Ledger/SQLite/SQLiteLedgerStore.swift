import Foundation
import Fulfilment
import GRDB
import GRDBSQLite
import Logging
import Synchronization
import Wire

/// The embedded ledger: one SQLite file in WAL mode, for one worker instance.
public final class SQLiteLedgerStore: SQLLedgerStore {
    /// The open database: replaced by ``reopen()`` when the file's volume went read-only or away and came back.
    let opened: Mutex<OpenedFile>
    /// The ledger's `ledger_identity` mark, read by ``migrate()``: a file opened again must carry the same.
    let identityMark = Mutex<Int64?>(nil)
    /// The last file found at the path that was not this ledger (said once).
    let refusedFile = Mutex<FileIdentity?>(nil)
    /// The databases open before a ``reopen()``, kept open for good (see there).
    let retiredFiles = Mutex<[OpenedFile]>([])
    /// Whether a ``reopen()`` is under way (one at a time: a probe that gave up on one does not start another).
    let reopening = Mutex(false)
    /// The database file's path.
    let path: String
    let logger: Logger
    /// Whether ``migrate()`` converts a ledger file made before retention to incremental vacuum (the daemon's start
    /// does; commands that look into a ledger a daemon may be using never rewrite it).
    let convertsToIncrementalVacuum: Bool
    /// `ledger.min_free_bytes`: below this much free space on the file's file system the ledger counts as unable to
    /// write (``storageShortfall()``); 0 checks nothing.
    let minFreeBytes: Int64

    var pool: DatabasePool { opened.withLock { $0.pool } }
    var batcher: SQLiteWriteBatcher { opened.withLock { $0.batcher } }

    /// Opens (creating if needed) the database at `path`.
    public init(
        path: String, logger: Logger = Logger(label: "iap-worker.ledger"), convertsToIncrementalVacuum: Bool = false,
        minFreeBytes: Int64 = 0
    ) throws(LedgerError) {
        self.logger = logger
        self.path = path
        self.convertsToIncrementalVacuum = convertsToIncrementalVacuum
        self.minFreeBytes = minFreeBytes
        do {
            opened = Mutex(try OpenedFile(path: path))
        } catch {
            throw LedgerError(
                code: .unavailable, message: "cannot open SQLite ledger at \(path): \(Self.describe(error))")
        }
    }

    public func migrate() async throws {
        do {
            try prepareIncrementalVacuum()
        } catch {
            // Best effort: without it the pruned pages are reused by new rows, the file only does not shrink.
            logger.warning(
                "the ledger file could not be converted to incremental vacuum; it keeps its size and is tried again at the next start",
                metadata: ["iap.error": "\(Self.describe(error))"])
        }
        var migrator = DatabaseMigrator()
        for migration in LedgerSchema.migrations(.sqlite) {
            migrator.registerMigration(migration.name) { db in
                for statement in migration.sql { try db.execute(sql: statement) }
                for index in migration.indexes { try db.execute(sql: index.create(concurrently: false)) }
            }
        }
        do {
            try await SQLiteMigrationLock.holding(forDatabaseAt: path, logger: logger) { try migrator.migrate(pool) }
        } catch let error as LedgerError {
            throw error
        } catch {
            throw LedgerError(code: .migration, message: "migrating the SQLite ledger failed: \(Self.describe(error))")
        }
        await markIdentity()
    }

    public func grant(paymentSeq: String) async throws -> GrantRecord? {
        try await read { db in try Self.fetchGrant(paymentSeq, db) }
    }

    static func insertGrant(_ grant: GrantRecord, _ event: OutboxEvent, _ db: Database) throws -> GrantInsertResult {
        // A refund recorded before the grant (the one writer orders the two): the purchase is never granted. A grant
        // that exists already answers first.
        if let key = StorePaymentKey(grant), let refund = try pendingRefund(key, db) {
            if let existing = try fetchGrant(grant.paymentSeq, db) { return .alreadyGranted(existing) }
            return .refunded(notificationId: refund)
        }
        // Bound in place through SQLite's C API (GRDB's arguments boxed and copied every value of the 24).
        try db.cachedStatement(sql: Self.insertGrantSQL).run(Self.values(of: grant), in: db)
        guard db.changesCount == 1 else {
            guard let existing = try fetchGrant(grant.paymentSeq, db) else {
                throw LedgerError(code: .conflict, message: "grant \(grant.paymentSeq) conflicted but cannot be read")
            }
            return .alreadyGranted(existing)
        }
        try Self.insert(event, db)
        return .inserted
    }

    static func insertRejection(_ rejection: RejectionRecord, _ event: OutboxEvent, _ db: Database) throws -> Bool {
        let key = rejection.key
        try db.cachedStatement(sql: Self.insertRejectionSQL).run(
            [
                .text(key.paymentSeq), .text(key.userId), .text(key.tokenHash), .text(rejection.reason),
                SQLiteArgument(rejection.resultCode), SQLiteArgument(rejection.resultMessage),
                SQLiteArgument(rejection.detail),
                .text(rejection.eventID), .integer(rejection.rejectedAt.epochMilliseconds),
                SQLiteArgument(rejection.source?.topic),
                SQLiteArgument(rejection.source.map { Int64($0.partition) }), SQLiteArgument(rejection.source?.offset),
                SQLiteArgument(rejection.messageTimestampMilliseconds), SQLiteArgument(rejection.verdict?.paymentId),
                SQLiteArgument(rejection.verdict?.gamebaseProductId), SQLiteArgument(rejection.verdict?.marketId),
                SQLiteArgument(rejection.verdict?.price), SQLiteArgument(rejection.verdict?.currency),
            ], in: db)
        guard db.changesCount == 1 else { return false }
        try Self.insert(event, db)
        return true
    }

    static func fetchGrant(_ paymentSeq: String, _ db: Database) throws -> GrantRecord? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(LedgerSchema.grantColumns) FROM grants WHERE payment_seq = ?"),
            arguments: [paymentSeq]
        ).map(Self.grant(from:))
    }

    /// Whether the ledger holds a grant of `key.paymentSeq` and a rejection of `key`, in one query that builds no
    /// row (a row of the grants' 24 columns costs two dozen allocations, read or not).
    static func presence(_ key: RejectionKey, _ db: Database) throws -> (grant: Bool, rejection: Bool) {
        var bits: Int64 = 0
        try db.cachedStatement(
            sql: """
                SELECT EXISTS (SELECT 1 FROM grants WHERE payment_seq = ?)
                     + 2 * EXISTS (SELECT 1 FROM rejections WHERE payment_seq = ? AND user_id = ? AND token_hash = ?)
                """
        ).run([.text(key.paymentSeq), .text(key.paymentSeq), .text(key.userId), .text(key.tokenHash)], in: db) { row in
            bits = sqlite3_column_int64(row, 0)
        }
        return (bits & 1 != 0, bits & 2 != 0)
    }

    static func fetchRejection(_ key: RejectionKey, _ db: Database) throws -> RejectionRecord? {
        try Row.fetchOne(
            db.cachedStatement(
                sql:
                    "SELECT \(LedgerSchema.rejectionColumns) FROM rejections WHERE payment_seq = ? AND user_id = ? AND token_hash = ?"
            ),
            arguments: [key.paymentSeq, key.userId, key.tokenHash]
        ).map(Self.rejection(from:))
    }

    public func event(id: String) async throws -> OutboxEvent? {
        try await read { db in
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT \(LedgerSchema.outboxColumns) FROM outbox WHERE id = ?"),
                arguments: [id]
            )
            .map(Self.event(from:))
        }
    }

    static func markPublished(_ eventID: String, at date: Date, _ db: Database) throws {
        let ms = date.epochMilliseconds
        try db.cachedStatement(
            sql:
                "UPDATE outbox SET published_at_ms = ?, claimed_until_ms = NULL WHERE id = ? AND published_at_ms IS NULL"
        ).run([.integer(ms), .text(eventID)], in: db)
        try db.cachedStatement(
            sql: """
                UPDATE grants SET event_published_at_ms = ?
                WHERE event_published_at_ms IS NULL AND payment_seq = (SELECT payment_seq FROM outbox WHERE id = ?)
                  AND ? LIKE '%:item-granted'
                """
        ).run([.integer(ms), .text(eventID), .text(eventID)], in: db)
    }

    static func markConsumed(_ paymentSeq: String, resultCode: Int, at date: Date, _ db: Database) throws -> Bool {
        try db.cachedStatement(
            sql: """
                UPDATE grants SET state = 'consumed', consumed_at_ms = ?, last_result_code = ?,
                    consume_attempts = consume_attempts + 1, sweep_claimed_until_ms = NULL
                WHERE payment_seq = ? AND state = 'granted'
                """
        ).run([.integer(date.epochMilliseconds), .integer(Int64(resultCode)), .text(paymentSeq)], in: db)
        return db.changesCount == 1
    }

    static func recordConsumeFailure(_ paymentSeq: String, resultCode: Int?, _ db: Database) throws {
        try db.cachedStatement(
            sql: """
                UPDATE grants SET consume_attempts = consume_attempts + 1, last_result_code = ?
                WHERE payment_seq = ? AND state = 'granted'
                """
        ).run([SQLiteArgument(resultCode), .text(paymentSeq)], in: db)
    }

    public func claimUnconsumedGrants(grantedBefore: Date, limit: Int, lease: Duration, now: Date) async throws
        -> [GrantRecord]
    {
        let nowMs = now.epochMilliseconds
        let until = nowMs + Int64(lease.components.seconds * 1000)
        let beyond = LeaseEnd.latest(now: nowMs, until: until)
        return try await write { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        UPDATE grants SET sweep_claimed_until_ms = ?
                        WHERE payment_seq IN (
                            SELECT payment_seq FROM grants
                            WHERE \(LedgerSchema.waitingForConsume) AND granted_at_ms < ?
                              AND (sweep_claimed_until_ms IS NULL OR sweep_claimed_until_ms < ? OR sweep_claimed_until_ms > ?)
                            ORDER BY granted_at_ms LIMIT ?)
                        RETURNING \(LedgerSchema.grantColumns)
                        """),
                arguments: [until, grantedBefore.epochMilliseconds, nowMs, beyond, limit]
            ).map(Self.grant(from:))
        }
    }

    public func claimUnpublishedEvents(createdBefore: Date, limit: Int, lease: Duration, now: Date) async throws
        -> [OutboxEvent]
    {
        let nowMs = now.epochMilliseconds
        let until = nowMs + Int64(lease.components.seconds * 1000)
        let beyond = LeaseEnd.latest(now: nowMs, until: until)
        return try await write { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        UPDATE outbox SET claimed_until_ms = ?
                        WHERE id IN (
                            SELECT id FROM outbox
                            WHERE published_at_ms IS NULL AND created_at_ms < ?
                              AND (claimed_until_ms IS NULL OR claimed_until_ms < ? OR claimed_until_ms > ?)
                            ORDER BY created_at_ms LIMIT ?)
                        RETURNING \(LedgerSchema.outboxColumns)
                        """),
                arguments: [until, createdBefore.epochMilliseconds, nowMs, beyond, limit]
            ).map(Self.event(from:))
        }
    }

    public func rejections(paymentSeq: String) async throws -> [RejectionRecord] {
        try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql:
                        "SELECT \(LedgerSchema.rejectionColumns) FROM rejections WHERE payment_seq = ? ORDER BY rejected_at_ms"
                ),
                arguments: [paymentSeq]
            ).map(Self.rejection(from:))
        }
    }

    public func events(paymentSeq: String) async throws -> [OutboxEvent] {
        try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql:
                        "SELECT \(LedgerSchema.outboxColumns) FROM outbox WHERE payment_seq = ? ORDER BY created_at_ms, id"
                ),
                arguments: [paymentSeq]
            ).map(Self.event(from:))
        }
    }

    public func stats() async throws -> LedgerStats {
        try await read { db in
            var granted = 0
            var consumed = 0
            for row in try Row.fetchAll(
                db.cachedStatement(sql: "SELECT state, COUNT(*) AS n FROM grants GROUP BY state"))
            {
                let state: String = row["state"]
                if state == "granted" { granted = row["n"] } else { consumed = row["n"] }
            }
            var rejections: [String: Int] = [:]
            for row in try Row.fetchAll(
                db.cachedStatement(sql: "SELECT reason, COUNT(*) AS n FROM rejections GROUP BY reason"))
            {
                rejections[row["reason"]] = row["n"]
            }
            let unpublished =
                try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM outbox WHERE published_at_ms IS NULL"))
                ?? 0
            return LedgerStats(
                granted: granted, consumed: consumed, rejections: rejections, unpublishedEvents: unpublished)
        }
    }

    public func countUnconsumed() async throws -> Int {
        try await read { db in
            do {
                return try Int.fetchOne(
                    db.cachedStatement(sql: "SELECT COUNT(*) FROM grants WHERE \(LedgerSchema.waitingForConsume)")) ?? 0
            } catch let error as DatabaseError where Self.namesAMissingColumn(error) {
                // A ledger not migrated to 009 yet (`check-config` migrates nothing).
                throw LedgerError(code: .missingTable, message: "SQLite: \(Self.describe(error))")
            }
        }
    }

    public func countSetAside() async throws -> Int {
        try await read { db in
            try Int.fetchOne(
                db.cachedStatement(sql: "SELECT COUNT(*) FROM grants WHERE \(LedgerSchema.setAside)")) ?? 0
        }
    }

    public func resumeSetAsideGrants() async throws -> Int {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE grants SET consume_set_aside_at_ms = NULL
                    WHERE \(LedgerSchema.setAside) AND NOT (\(LedgerSchema.revokedByStandingRefund))
                    """)
            return db.changesCount
        }
    }

    public func setAsideRevokedGrant(paymentSeq: String, at date: Date) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE grants SET consume_set_aside_at_ms = ?
                    WHERE payment_seq = ? AND \(LedgerSchema.waitingForConsume) AND (\(LedgerSchema.revokedByStandingRefund))
                    """,
                arguments: [date.epochMilliseconds, paymentSeq])
            return db.changesCount == 1
        }
    }

    public func oldestUnconsumedGrantedAt() async throws -> Date? {
        try await read { db in
            try Int64.fetchOne(
                db.cachedStatement(
                    sql: "SELECT MIN(granted_at_ms) FROM grants WHERE \(LedgerSchema.waitingForConsume)")
            )
            .map(Date.init(epochMilliseconds:))
        }
    }

    public func close() async throws {
        try pool.close()
    }

    // MARK: Helpers

    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do { return try await pool.read(body) } catch { throw wrap(error) }
    }

    /// `body` in the group commit: it may run twice (``SQLiteWriteBatcher/write(_:)``), so it touches nothing but
    /// the database (a warning logged inside, as `readable` does, is logged again by a second run).
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do { return try await batcher.write(body) } catch { throw wrap(error) }
    }

    /// A database error as the ledger's, its kind decided by SQLite's result code: the storage's failures (a full or
    /// read-only disk, an I/O error, a file that cannot be opened again) are `unwritable`, an outage; the rest are
    /// this statement's.
    func wrap(_ error: any Error) -> LedgerError {
        if let error = error as? LedgerError { return error }
        guard let error = error as? DatabaseError else {
            return LedgerError(code: .query, message: "SQLite: \(Self.describe(error))")
        }
        if let condition = Self.storageCondition(error.resultCode) {
            return LedgerError(code: .unwritable, message: "\(condition) (\(path)); SQLite: \(Self.describe(error))")
        }
        if error.resultCode == .SQLITE_ERROR, error.message?.hasPrefix("no such table") == true {
            return LedgerError(code: .missingTable, message: "SQLite: \(Self.describe(error))")
        }
        return LedgerError(code: .query, message: "SQLite: \(Self.describe(error))")
    }

    /// A statement naming a column the ledger does not have yet: one a newer migration adds (009's set-aside), read
    /// by a tool that migrates nothing (`find`, `check-config`) before the worker migrated the ledger.
    static func namesAMissingColumn(_ error: DatabaseError) -> Bool {
        error.resultCode == .SQLITE_ERROR && error.message?.hasPrefix("no such column") == true
    }

    /// What a primary result code says of the storage, `nil` for a statement's own failure. SQLITE_IOERR covers its
    /// extended codes (a failed write, fsync or read; ENOSPC met while writing the WAL). A corrupt file (often met
    /// after a disk error and its repair) is the storage's too: waiting for a human beats dead-lettering purchases
    /// one by one while it lasts; the process out of memory likewise.
    static func storageCondition(_ code: ResultCode) -> String? {
        switch code {
        case .SQLITE_FULL: "disk full"
        case .SQLITE_READONLY: "read-only"
        case .SQLITE_IOERR: "I/O error"
        case .SQLITE_CANTOPEN: "cannot open the file"
        case .SQLITE_CORRUPT, .SQLITE_NOTADB: "corrupt"
        case .SQLITE_NOMEM: "out of memory"
        default: nil
        }
    }

    /// SQLite's own message, without the statement's arguments (they can hold purchase tokens).
    static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError { return "\(error.resultCode): \(error.message ?? "")" }
        return "\(type(of: error))"
    }

    /// Statements of the purchase path, written once (an interpolated one is built and hashed again every call).
    static let insertGrantSQL = """
        INSERT INTO grants (\(LedgerSchema.grantColumns))
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (payment_seq) DO NOTHING
        """
    static let insertRejectionSQL = """
        INSERT INTO rejections (\(LedgerSchema.rejectionColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT DO NOTHING
        """
    static let insertEventSQL =
        "INSERT INTO outbox (\(LedgerSchema.outboxColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"

    /// A grant's values, in `LedgerSchema.grantColumns` order.
    static func values(of grant: GrantRecord) -> [SQLiteArgument] {
        [
            .text(grant.paymentSeq), .text(grant.userId), .text(grant.gamebaseProductId), .text(grant.purchaseToken),
            SQLiteArgument(grant.productSeq), SQLiteArgument(grant.marketId), SQLiteArgument(grant.productType),
            SQLiteArgument(grant.price), SQLiteArgument(grant.currency), SQLiteArgument(grant.paymentId),
            SQLiteArgument(grant.isTestPurchase), SQLiteArgument(grant.purchaseTime), SQLiteArgument(grant.payload),
            .text(grant.state.rawValue), .integer(grant.grantedAt.epochMilliseconds),
            SQLiteArgument(grant.consumedAt?.epochMilliseconds), .integer(Int64(grant.consumeAttempts)),
            SQLiteArgument(grant.lastResultCode), SQLiteArgument(grant.eventPublishedAt?.epochMilliseconds),
            SQLiteArgument(grant.source?.topic), SQLiteArgument(grant.source.map { Int64($0.partition) }),
            SQLiteArgument(grant.source?.offset), .text(grant.origin.rawValue),
            SQLiteArgument(grant.messageTimestampMilliseconds),
        ]
    }

    static func insert(_ event: OutboxEvent, _ db: Database) throws {
        try db.cachedStatement(sql: Self.insertEventSQL).run(
            [
                .text(event.id), SQLiteArgument(event.paymentSeq), .text(event.topic), SQLiteArgument(event.key),
                .text(LedgerCoding.encodeHeaders(event.headers)), .blob(event.payload),
                .integer(event.createdAt.epochMilliseconds), SQLiteArgument(event.publishedAt?.epochMilliseconds),
            ], in: db)
    }

    static func source(_ row: Row) -> MessageSource? {
        guard let topic: String = row["source_topic"] else { return nil }
        return MessageSource(
            topic: topic, partition: Int32(row["source_partition"] as Int64? ?? -1), offset: row["source_offset"] ?? -1)
    }

    static let grantColumnNames = LedgerSchema.grantColumns.split(separator: ",").map {
        $0.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The grant in `row`, whose first columns are `LedgerSchema.grantColumns` in their order (every query that
    /// reads a grant selects them first).
    ///
    /// Read by position: by name, GRDB lower-cases and compares every column's name for each value read — about 300
    /// `lowercased()` calls per grant, on the path of every duplicate message (perf, issue #39).
    static func grant(from row: Row) -> GrantRecord {
        assert(
            Array(row.columnNames.prefix(Self.grantColumnNames.count)) == Self.grantColumnNames,
            "a grant row must start with grantColumns")
        let topic: String? = row[19]
        return GrantRecord(
            paymentSeq: row[0], userId: row[1], gamebaseProductId: row[2], purchaseToken: row[3], productSeq: row[4],
            marketId: row[5], productType: row[6], price: row[7], currency: row[8], paymentId: row[9],
            isTestPurchase: row[10], purchaseTime: row[11], payload: row[12],
            state: GrantState(rawValue: row[13]) ?? .granted,
            grantedAt: Date(epochMilliseconds: row[14]),
            consumedAt: (row[15] as Int64?).map(Date.init(epochMilliseconds:)),
            consumeAttempts: row[16], lastResultCode: row[17],
            eventPublishedAt: (row[18] as Int64?).map(Date.init(epochMilliseconds:)),
            source: topic.map {
                MessageSource(topic: $0, partition: Int32(row[20] as Int64? ?? -1), offset: row[21] ?? -1)
            },
            origin: (row[22] as String?).flatMap(PurchaseOrigin.init(rawValue:)) ?? .message,
            messageTimestampMilliseconds: row[23])
    }

    static func rejection(from row: Row) -> RejectionRecord {
        RejectionRecord(
            key: RejectionKey(paymentSeq: row["payment_seq"], userId: row["user_id"], tokenHash: row["token_hash"]),
            reason: row["reason"], resultCode: row["result_code"], resultMessage: row["result_message"],
            detail: row["detail"],
            eventID: row["event_id"], rejectedAt: Date(epochMilliseconds: row["rejected_at_ms"]), source: source(row),
            messageTimestampMilliseconds: row["source_timestamp_ms"], verdict: verdict(row))
    }

    static func verdict(_ row: Row) -> PaymentVerdict? {
        let verdict = PaymentVerdict(
            paymentId: row["payment_id"], gamebaseProductId: row["verdict_product_id"],
            marketId: row["verdict_market_id"],
            price: row["verdict_price"], currency: row["verdict_currency"])
        return verdict == PaymentVerdict() ? nil : verdict
    }

    static func event(from row: Row) -> OutboxEvent {
        OutboxEvent(
            id: row["id"], paymentSeq: row["payment_seq"], topic: row["topic"],
            key: (row["event_key"] as Data?).map { Array($0) }, headers: LedgerCoding.decodeHeaders(row["headers"]),
            payload: Array(row["payload"] as Data), createdAt: Date(epochMilliseconds: row["created_at_ms"]),
            publishedAt: (row["published_at_ms"] as Int64?).map(Date.init(epochMilliseconds:)))
    }
}

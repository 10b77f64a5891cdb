import Foundation
import Fulfilment
import GRDB
import Logging

/// The refunds role on SQLite: one writer, so a notification and a grant of the same payment never interleave; each
/// notification is recorded and carried out in one write transaction.
extension SQLiteLedgerStore {
    /// Apple's 12 hours for a consumption answer, as the queries' literal.
    static let answerWindow = String(ConsumptionRequest.answerWindowMilliseconds)

    public func record(_ record: StoreNotificationRecord, events: EventFactory, now: Date) async throws
        -> RefundRecording
    {
        try await write { db in
            if let existing = try Self.fetchNotification(record.notification.notificationId, db) {
                return RefundRecording(outcome: existing.outcome, duplicate: true, paymentSeq: existing.paymentSeq)
            }
            let plan = RefundPlan.decide(
                record, context: try Self.refundContext(record.paymentKey, db), events: events, now: now)
            try Self.insert(record.planned(plan), db)
            try Self.carryOut(plan, payment: record.paymentKey, db)
            return RefundRecording(plan)
        }
    }

    public func settlePendingRefunds(limit: Int, events: EventFactory, now: Date) async throws -> [RefundRecording] {
        let logger = logger
        return try await write { db in
            let payments = try Row.fetchAll(
                db,
                sql: """
                    SELECT n.market_id, n.payment_id FROM store_notifications n
                    WHERE n.outcome IN ('pending', 'pending_partial')
                      AND EXISTS (SELECT 1 FROM grants g WHERE g.payment_id = n.payment_id AND g.market_id = n.market_id)
                    GROUP BY n.market_id, n.payment_id ORDER BY min(n.received_at_ms), n.payment_id LIMIT ?
                    """,
                arguments: [max(0, limit)]
            ).map { StorePaymentKey(marketId: $0["market_id"], paymentId: $0["payment_id"]) }
            return try payments.compactMap { key in
                guard let context = try Self.readable(key, logger, { try Self.refundContext(key, db) }),
                    let plan = RefundPlan.settle(context: context, events: events, now: now)
                else { return nil }
                try Self.carryOut(plan, payment: key, db)
                return RefundRecording(plan)
            }
        }
    }

    /// What `read` reads of a payment, or `nil` when one of its rows names a store, kind or outcome this version does
    /// not know (a newer version's, which settles it): said, never an error that stops the other payments.
    static func readable<Value>(
        _ key: StorePaymentKey, _ logger: Logger, _ read: () throws -> Value
    ) throws -> Value? {
        do {
            return try read()
        } catch let error as LedgerError where error.code == .query {
            logger.warning(
                "a pending refund this version cannot read is left to the version that wrote it",
                metadata: ["iap.payment_id": "\(key.paymentId)", "iap.error": "\(error)"])
            return nil
        }
    }

    /// Writes what `plan` decided, beside the recorded notification's own row.
    static func carryOut(_ plan: RefundPlan, payment key: StorePaymentKey?, _ db: Database) throws {
        for revocation in plan.revocations { try insert(revocation, db) }
        for reversal in plan.reversals {
            try db.execute(
                sql: """
                    UPDATE \(LedgerSchema.revocationTable(number: reversal.number)) SET reversed_by = ?, reversed_at_ms = ?
                    WHERE payment_seq = ? AND reversed_by IS NULL\(reversal.number > 1 ? " AND number = ?" : "")
                    """,
                arguments: StatementArguments(
                    [reversal.reversedBy, reversal.reversedAt?.epochMilliseconds, reversal.paymentSeq]
                        as [(any DatabaseValueConvertible)?] + (reversal.number > 1 ? [Int64(reversal.number)] : [])))
        }
        if plan.resumesConsume, let paymentSeq = plan.paymentSeq {
            try db.execute(
                sql: "UPDATE grants SET consume_set_aside_at_ms = NULL WHERE payment_seq = ?", arguments: [paymentSeq])
        }
        for settled in plan.settled {
            try db.execute(
                sql: "UPDATE store_notifications SET outcome = ?, payment_seq = ? WHERE notification_id = ?",
                arguments: [settled.outcome.rawValue, settled.paymentSeq, settled.notificationId])
        }
        if plan.clearsRefundedRejections, let key {
            try db.execute(
                sql: "DELETE FROM rejections WHERE payment_id = ? AND verdict_market_id = ? AND reason = 'refunded'",
                arguments: [key.paymentId, key.marketId])
        }
        for event in plan.events { try insert(event, db) }
    }

    public func notifications(paymentKey: StorePaymentKey) async throws -> [StoreNotificationRecord] {
        try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT \(LedgerSchema.notificationColumns) FROM store_notifications
                        WHERE market_id = ? AND payment_id = ? ORDER BY received_at_ms, notification_id
                        """),
                arguments: [paymentKey.marketId, paymentKey.paymentId]
            ).map { try Self.notificationRow($0).record() }
        }
    }

    public func notification(id: String) async throws -> StoreNotificationRecord? {
        try await read { db in try Self.fetchNotification(id, db) }
    }

    public func revocations(paymentSeq: String) async throws -> [RevocationRecord] {
        try await read { db in try Self.fetchRevocations(paymentSeq, db) }
    }

    public func recordRefusal(_ refusal: RefusedNotification) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO refused_notifications (\(LedgerSchema.refusalColumns), last_source, claimed_id)
                    VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
                    ON CONFLICT (body_hash) DO UPDATE SET refused_count = refused_count + 1,
                        last_received_at_ms = max(last_received_at_ms, excluded.last_received_at_ms),
                        last_source = coalesce(excluded.last_source, last_source),
                        claimed_id = coalesce(claimed_id, excluded.claimed_id)
                    """,
                arguments: [
                    refusal.bodyHash, refusal.store?.rawValue, refusal.code, refusal.detail,
                    Int64(clamping: refusal.bodyBytes), refusal.firstReceivedAt.epochMilliseconds,
                    refusal.lastReceivedAt.epochMilliseconds, refusal.source, refusal.claimedId,
                ])
        }
    }

    public func refusals(limit: Int) async throws -> [RefusedNotification] {
        try await refusals(where: "", [], limit: limit)
    }

    public func refusals(claimedId: String, limit: Int) async throws -> [RefusedNotification] {
        try await refusals(where: "WHERE claimed_id = ?", [claimedId], limit: limit)
    }

    private func refusals(where condition: String, _ values: [String], limit: Int) async throws
        -> [RefusedNotification]
    {
        try await read { db in
            let rows: [Row]
            do {
                rows = try Row.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT \(LedgerSchema.refusalColumns), last_source, claimed_id FROM refused_notifications
                            \(condition) ORDER BY last_received_at_ms DESC, body_hash LIMIT ?
                            """),
                    arguments: StatementArguments(
                        values.map { $0 as any DatabaseValueConvertible } + [
                            max(0, limit) as any DatabaseValueConvertible
                        ]))
            } catch let error as DatabaseError where !values.isEmpty && Self.namesAMissingColumn(error) {
                // A ledger not migrated to 010 yet (`find` migrates nothing): no refusal claims an id there.
                return []
            }
            return rows.map {
                RefusedNotification(
                    bodyHash: $0["body_hash"], store: ($0["store"] as String?).flatMap(Store.init(rawValue:)),
                    code: $0["code"], detail: $0["detail"], bodyBytes: $0["body_bytes"],
                    firstReceivedAt: Date(epochMilliseconds: $0["first_received_at_ms"]),
                    lastReceivedAt: Date(epochMilliseconds: $0["last_received_at_ms"]), count: $0["refused_count"],
                    source: $0["last_source"], claimedId: $0["claimed_id"])
            }
        }
    }

    public func claimHistoryPoll(name: String, owner: String, until: Date, now: Date) async throws
        -> HistoryPollMark?
    {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO store_poll_marks (name) VALUES (?) ON CONFLICT (name) DO NOTHING", arguments: [name])
            return try Row.fetchOne(
                db,
                sql: """
                    UPDATE store_poll_marks SET lease_owner = ?, lease_until_ms = ?
                    WHERE name = ?
                      AND (lease_owner IS NULL OR lease_owner = ? OR lease_until_ms < ? OR lease_until_ms > ?)
                    RETURNING name, window_start_ms, window_end_ms, pagination_token, last_success_ms, read_through_ms
                    """,
                arguments: [
                    owner, until.epochMilliseconds, name, owner, now.epochMilliseconds,
                    LeaseEnd.latest(now: now.epochMilliseconds, until: until.epochMilliseconds),
                ]
            ).map(Self.pollMark(from:))
        }
    }

    public func saveHistoryPoll(_ mark: HistoryPollMark, owner: String, leaseUntil: Date?) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE store_poll_marks SET window_start_ms = ?, window_end_ms = ?, pagination_token = ?,
                        last_success_ms = ?, read_through_ms = ?,
                        lease_owner = CASE WHEN ? IS NULL THEN NULL ELSE lease_owner END, lease_until_ms = ?
                    WHERE name = ? AND lease_owner = ?
                    """,
                arguments: [
                    mark.windowStart?.epochMilliseconds, mark.windowEnd?.epochMilliseconds, mark.paginationToken,
                    mark.lastSuccess?.epochMilliseconds, mark.readThrough?.epochMilliseconds,
                    leaseUntil?.epochMilliseconds,
                    leaseUntil?.epochMilliseconds, mark.name, owner,
                ])
            return db.changesCount == 1
        }
    }

    public func historyPolls() async throws -> [HistoryPollMark] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT name, window_start_ms, window_end_ms, pagination_token, last_success_ms, read_through_ms
                    FROM store_poll_marks ORDER BY name
                    """
            ).map(Self.pollMark(from:))
        }
    }

    public func claimConsumptionRequests(now: Date, until: Date, limit: Int) async throws -> [ConsumptionRequest] {
        try await write { db in
            try Row.fetchAll(
                db,
                sql: """
                    WITH due AS (
                        SELECT n.notification_id, n.payment_id, n.occurred_at_ms FROM store_notifications n
                        LEFT JOIN consumption_answers a ON a.notification_id = n.notification_id
                        WHERE n.kind = 'consumption_request' AND n.store = 'apple' AND n.payment_id IS NOT NULL
                          AND n.occurred_at_ms + \(Self.answerWindow) > ?
                          AND (a.notification_id IS NULL OR (a.state = 'pending' AND a.next_attempt_ms <= ?))
                        ORDER BY n.occurred_at_ms, n.notification_id LIMIT ?
                    )
                    INSERT INTO consumption_answers (notification_id, transaction_id, deadline_ms, state, attempts,
                        next_attempt_ms)
                    SELECT notification_id, payment_id, occurred_at_ms + \(Self.answerWindow), 'pending', 0, ? FROM due WHERE true
                    ON CONFLICT (notification_id) DO UPDATE SET next_attempt_ms = excluded.next_attempt_ms
                    WHERE consumption_answers.state = 'pending' AND consumption_answers.next_attempt_ms <= ?
                    RETURNING notification_id, transaction_id, deadline_ms, attempts
                    """,
                arguments: [
                    now.epochMilliseconds, now.epochMilliseconds, max(0, limit), until.epochMilliseconds,
                    now.epochMilliseconds,
                ]
            ).map {
                ConsumptionRequest(
                    notificationId: $0["notification_id"], transactionId: $0["transaction_id"],
                    deadline: Date(epochMilliseconds: $0["deadline_ms"]), attempts: $0["attempts"],
                    claimedUntil: Date(epochMilliseconds: until.epochMilliseconds))
            }.sorted { $0.deadline < $1.deadline }
        }
    }

    public func recordConsumptionAnswer(_ answer: ConsumptionAnswer, claim request: ConsumptionRequest) async throws
        -> Bool
    {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE consumption_answers SET state = ?, delivery_status = ?, attempts = ?, last_error = ?,
                        answered_at_ms = ?, next_attempt_ms = ?
                    WHERE notification_id = ? AND state = 'pending' AND next_attempt_ms = ?
                    """,
                arguments: [
                    answer.state.rawValue, answer.deliveryStatus, answer.attempts, answer.lastError,
                    answer.answeredAt?.epochMilliseconds, answer.nextAttemptAt?.epochMilliseconds,
                    answer.notificationId, request.claimedUntil.epochMilliseconds,
                ])
            return db.changesCount == 1
        }
    }

    public func nearestConsumptionDeadline(now: Date) async throws -> Date? {
        try await read { db in
            try Int64.fetchOne(
                db,
                sql: """
                    SELECT min(n.occurred_at_ms) + \(Self.answerWindow) FROM store_notifications n
                    LEFT JOIN consumption_answers a ON a.notification_id = n.notification_id
                    WHERE n.kind = 'consumption_request' AND n.store = 'apple' AND n.payment_id IS NOT NULL
                      AND n.occurred_at_ms + \(Self.answerWindow) > ? AND (a.notification_id IS NULL OR a.state = 'pending')
                    """,
                arguments: [now.epochMilliseconds]
            ).map(Date.init(epochMilliseconds:))
        }
    }

    public func consumptionAnswer(notificationId: String) async throws -> ConsumptionAnswer? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT notification_id, transaction_id, state, delivery_status, attempts, last_error,
                        answered_at_ms, next_attempt_ms
                    FROM consumption_answers WHERE notification_id = ?
                    """,
                arguments: [notificationId]
            ).map { row in
                ConsumptionAnswer(
                    notificationId: row["notification_id"], transactionId: row["transaction_id"],
                    state: ConsumptionAnswer.State(rawValue: row["state"]) ?? .pending,
                    deliveryStatus: row["delivery_status"], attempts: row["attempts"], lastError: row["last_error"],
                    answeredAt: (row["answered_at_ms"] as Int64?).map(Date.init(epochMilliseconds:)),
                    nextAttemptAt: (row["next_attempt_ms"] as Int64?).map(Date.init(epochMilliseconds:)))
            }
        }
    }

    public func grant(paymentKey: StorePaymentKey) async throws -> GrantRecord? {
        try await read { db in try Self.refundContext(paymentKey, db).grant }
    }

    static func pollMark(from row: Row) -> HistoryPollMark {
        HistoryPollMark(
            name: row["name"], windowStart: (row["window_start_ms"] as Int64?).map(Date.init(epochMilliseconds:)),
            windowEnd: (row["window_end_ms"] as Int64?).map(Date.init(epochMilliseconds:)),
            paginationToken: row["pagination_token"],
            lastSuccess: (row["last_success_ms"] as Int64?).map(Date.init(epochMilliseconds:)),
            readThrough: (row["read_through_ms"] as Int64?).map(Date.init(epochMilliseconds:)))
    }

    // MARK: Statements

    /// The id of a refund of `key` kept while no grant exists, if any.
    static func pendingRefund(_ key: StorePaymentKey, _ db: Database) throws -> String? {
        try String.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT min(notification_id) FROM store_notifications
                    WHERE market_id = ? AND payment_id = ? AND outcome = 'pending'
                    """),
            arguments: [key.marketId, key.paymentId])
    }

    static func refundContext(_ key: StorePaymentKey?, _ db: Database) throws -> RefundContext {
        guard let key else { return RefundContext() }
        let grant = try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT \(LedgerSchema.grantColumns) FROM grants WHERE payment_id = ? AND market_id = ?
                    ORDER BY granted_at_ms, payment_seq LIMIT 1
                    """),
            arguments: [key.paymentId, key.marketId]
        ).map(Self.grant(from:))
        let notices = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT \(LedgerSchema.notificationColumns) FROM store_notifications
                    WHERE market_id = ? AND payment_id = ? AND kind IN ('refund', 'refund_reversed')
                    """),
            arguments: [key.marketId, key.paymentId]
        ).map { try notificationRow($0).record() }
        return RefundContext(
            grant: grant, revocations: try grant.map { try fetchRevocations($0.paymentSeq, db) } ?? [],
            notices: notices)
    }

    static func fetchNotification(_ id: String, _ db: Database) throws -> StoreNotificationRecord? {
        try Row.fetchOne(
            db.cachedStatement(
                sql: "SELECT \(LedgerSchema.notificationColumns) FROM store_notifications WHERE notification_id = ?"),
            arguments: [id]
        ).map { try notificationRow($0).record() }
    }

    static func fetchRevocations(_ paymentSeq: String, _ db: Database) throws -> [RevocationRecord] {
        try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT \(LedgerSchema.revocationColumns), number FROM \(LedgerSchema.allRevocations)
                    WHERE payment_seq = ? ORDER BY number
                    """),
            arguments: [paymentSeq]
        ).map {
            try RevocationRow(
                paymentSeq: $0["payment_seq"], number: $0["number"], userId: $0["user_id"], store: $0["store"],
                notificationId: $0["notification_id"], reason: $0["reason"], storeReason: $0["store_reason"],
                quantity: $0["quantity"], revokedAtMilliseconds: $0["revoked_at_ms"],
                recordedAtMilliseconds: $0["recorded_at_ms"], reversedBy: $0["reversed_by"],
                reversedAtMilliseconds: $0["reversed_at_ms"]
            ).record()
        }
    }

    static func notificationRow(_ row: Row) -> NotificationRow {
        NotificationRow(
            notificationId: row["notification_id"], store: row["store"], kind: row["kind"],
            storeType: row["store_type"], authenticity: row["authenticity"], channel: row["channel"],
            deliveryId: row["delivery_id"], paymentId: row["payment_id"], purchaseTokenHash: row["purchase_token_hash"],
            application: row["application"], environment: row["environment"], productId: row["product_id"],
            storeReason: row["store_reason"], quantity: row["quantity"], occurredAtMilliseconds: row["occurred_at_ms"],
            receivedAtMilliseconds: row["received_at_ms"], outcome: row["outcome"], paymentSeq: row["payment_seq"])
    }

    static func insert(_ record: StoreNotificationRecord, _ db: Database) throws {
        let n = record.notification
        try db.execute(
            sql: """
                INSERT INTO store_notifications (\(LedgerSchema.notificationColumns))
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                n.notificationId, n.store.rawValue, n.store.marketId, n.kind.rawValue, n.storeType,
                n.authenticity.rawValue, record.channel.rawValue, n.deliveryId, n.paymentId, n.purchaseTokenHash,
                n.application, n.environment, n.productId, n.reason, n.quantity.map { Int64($0) },
                n.occurredAt.epochMilliseconds, record.receivedAt.epochMilliseconds, record.outcome.rawValue,
                record.paymentSeq,
            ])
    }

    static func insert(_ revocation: RevocationRecord, _ db: Database) throws {
        let further = revocation.number > 1
        try db.execute(
            sql: further
                ? """
                INSERT INTO further_revocations (\(LedgerSchema.revocationColumns), number)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (payment_seq, number) DO NOTHING
                """
                : """
                INSERT INTO revocations (\(LedgerSchema.revocationColumns))
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (payment_seq) DO NOTHING
                """,
            arguments: StatementArguments(
                [
                    revocation.paymentSeq, revocation.userId, revocation.store.rawValue, revocation.notificationId,
                    revocation.reason, revocation.storeReason, revocation.quantity.map { Int64($0) },
                    revocation.revokedAt.epochMilliseconds, revocation.recordedAt.epochMilliseconds,
                    revocation.reversedBy, revocation.reversedAt?.epochMilliseconds,
                ] as [(any DatabaseValueConvertible)?] + (further ? [Int64(revocation.number)] : [])))
    }
}

// MARK: The console's refunds page

extension SQLiteLedgerStore {
    public func latestRefunds(limit: Int) async throws -> [RefundListing] {
        try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT \(LedgerSchema.notificationColumns), \(LedgerSchema.grantUserOfNotification)
                        FROM store_notifications WHERE \(LedgerSchema.refundKinds)
                        ORDER BY received_at_ms DESC, notification_id DESC LIMIT ?
                        """),
                arguments: [max(0, limit)]
            ).map { RefundListing(record: try Self.notificationRow($0).record(), userId: $0["grant_user_id"]) }
        }
    }

    public func refundCounts(since: Date) async throws -> [RefundDayCount] {
        try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT received_at_ms / \(RefundDayCount.dayMilliseconds) AS day, kind, outcome, count(*) AS n
                        FROM store_notifications WHERE \(LedgerSchema.refundKinds) AND received_at_ms >= ?
                        GROUP BY received_at_ms / \(RefundDayCount.dayMilliseconds), kind, outcome
                        """),
                arguments: [since.epochMilliseconds]
            ).compactMap {
                NotificationRow.dayCount(day: $0["day"], kind: $0["kind"], outcome: $0["outcome"], count: $0["n"])
            }
        }
    }

    public func refundingUsers(since: Date, limit: Int) async throws -> [RefundingUser] {
        try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT user_id, count(*) AS n, count(reversed_by) AS reversed, max(recorded_at_ms) AS last_ms
                        FROM \(LedgerSchema.allRevocations) WHERE recorded_at_ms >= ?
                        GROUP BY user_id ORDER BY n DESC, user_id LIMIT ?
                        """),
                arguments: [since.epochMilliseconds, max(0, limit)]
            ).map {
                RefundingUser(
                    userId: $0["user_id"], revocations: $0["n"], reversed: $0["reversed"],
                    lastRecordedAt: Date(epochMilliseconds: $0["last_ms"]))
            }
        }
    }
}

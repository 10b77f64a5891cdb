import Foundation
import Fulfilment
import Logging
import PostgresNIO

/// The refunds role on PostgreSQL: each notification in one transaction that first takes its payment's advisory lock
/// (the one the grant path takes through `iap_refunded_payments`), then reads what the ledger holds about the payment
/// with a snapshot taken after the lock, so a grant of the same payment committed meanwhile is seen.
extension PostgresLedgerStore {
    /// Apple's 12 hours for a consumption answer, as the queries' literal.
    static let answerWindow = String(ConsumptionRequest.answerWindowMilliseconds)

    public func record(_ record: StoreNotificationRecord, events: EventFactory, now: Date) async throws
        -> RefundRecording
    {
        try await wrap {
            try await client.withTransaction(logger: logger) { connection in
                if let key = record.paymentKey { try await Self.lock(key, connection, logger) }
                if let existing = try await Self.fetchNotification(
                    record.notification.notificationId, connection, logger)
                {
                    return RefundRecording(
                        outcome: existing.outcome, duplicate: true, paymentSeq: existing.paymentSeq)
                }
                let context = try await Self.refundContext(record.paymentKey, connection, logger)
                let plan = RefundPlan.decide(record, context: context, events: events, now: now)
                // A notification without a payment takes no lock: two deliveries of it at once meet at its key.
                guard try await Self.insert(record.planned(plan), connection, logger) else {
                    let existing = try await Self.fetchNotification(
                        record.notification.notificationId, connection, logger)
                    return RefundRecording(
                        outcome: existing?.outcome ?? plan.outcome, duplicate: true, paymentSeq: existing?.paymentSeq)
                }
                try await Self.carryOut(plan, payment: record.paymentKey, connection, logger)
                return RefundRecording(plan)
            }
        }
    }

    public func settlePendingRefunds(limit: Int, events: EventFactory, now: Date) async throws -> [RefundRecording] {
        try await wrap {
            // The payments only: each one's lock is taken before its rows are read (one read, under the lock).
            var payments: [StorePaymentKey] = []
            for try await (market, payment) in try await client.query(
                """
                SELECT n.market_id, n.payment_id FROM store_notifications n
                WHERE n.outcome IN ('pending', 'pending_partial')
                  AND EXISTS (SELECT 1 FROM grants g WHERE g.payment_id = n.payment_id AND g.market_id = n.market_id)
                GROUP BY n.market_id, n.payment_id ORDER BY min(n.received_at_ms), n.payment_id COLLATE "C"
                LIMIT \(Int64(max(0, limit)))
                """, logger: logger
            ).decode((String, String).self) {
                payments.append(StorePaymentKey(marketId: market, paymentId: payment))
            }
            var recordings: [RefundRecording] = []
            for key in payments {
                let recording = try await client.withTransaction(logger: logger) { connection -> RefundRecording? in
                    try await Self.lock(key, connection, logger)
                    // Read under the lock: another instance may have settled it meanwhile. A row this version cannot
                    // read (a newer version's store, kind or outcome) leaves the payment to that version.
                    let context: RefundContext
                    do {
                        context = try await Self.refundContext(key, connection, logger)
                    } catch let error as LedgerError where error.code == .query {
                        logger.warning(
                            "a pending refund this version cannot read is left to the version that wrote it",
                            metadata: ["iap.payment_id": "\(key.paymentId)", "iap.error": "\(error)"])
                        return nil
                    }
                    guard let plan = RefundPlan.settle(context: context, events: events, now: now) else { return nil }
                    try await Self.carryOut(plan, payment: key, connection, logger)
                    return RefundRecording(plan)
                }
                if let recording { recordings.append(recording) }
            }
            return recordings
        }
    }

    /// The payment's transaction-scoped advisory lock: the one `iap_refunded_payments` takes for a grant.
    static func lock(_ key: StorePaymentKey, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.query(
            """
            SELECT pg_advisory_xact_lock(\(LedgerSchema.paymentLockClass), hashtext(\(key.marketId)::text || ':' || \(key.paymentId)::text))
            """, logger: logger)
    }

    /// Writes what `plan` decided, beside the recorded notification's own row.
    static func carryOut(
        _ plan: RefundPlan, payment key: StorePaymentKey?, _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        for r in plan.revocations {
            if r.number > 1 {
                try await connection.query(
                    """
                    INSERT INTO further_revocations (\(unescaped: LedgerSchema.revocationColumns), number) VALUES (
                        \(r.paymentSeq), \(r.userId), \(r.store.rawValue), \(r.notificationId), \(r.reason),
                        \(r.storeReason), \(r.quantity.map { Int64($0) }), \(r.revokedAt.epochMilliseconds),
                        \(r.recordedAt.epochMilliseconds), \(r.reversedBy), \(r.reversedAt?.epochMilliseconds),
                        \(Int64(r.number)))
                    ON CONFLICT (payment_seq, number) DO NOTHING
                    """, logger: logger)
            } else {
                try await connection.query(
                    """
                    INSERT INTO revocations (\(unescaped: LedgerSchema.revocationColumns)) VALUES (
                        \(r.paymentSeq), \(r.userId), \(r.store.rawValue), \(r.notificationId), \(r.reason),
                        \(r.storeReason), \(r.quantity.map { Int64($0) }), \(r.revokedAt.epochMilliseconds),
                        \(r.recordedAt.epochMilliseconds), \(r.reversedBy), \(r.reversedAt?.epochMilliseconds))
                    ON CONFLICT (payment_seq) DO NOTHING
                    """, logger: logger)
            }
        }
        for r in plan.reversals {
            if r.number > 1 {
                try await connection.query(
                    """
                    UPDATE further_revocations
                    SET reversed_by = \(r.reversedBy), reversed_at_ms = \(r.reversedAt?.epochMilliseconds)
                    WHERE payment_seq = \(r.paymentSeq) AND number = \(Int64(r.number)) AND reversed_by IS NULL
                    """, logger: logger)
            } else {
                try await connection.query(
                    """
                    UPDATE revocations SET reversed_by = \(r.reversedBy), reversed_at_ms = \(r.reversedAt?.epochMilliseconds)
                    WHERE payment_seq = \(r.paymentSeq) AND reversed_by IS NULL
                    """, logger: logger)
            }
        }
        if plan.resumesConsume, let paymentSeq = plan.paymentSeq {
            try await connection.query(
                "UPDATE grants SET consume_set_aside_at_ms = NULL WHERE payment_seq = \(paymentSeq)", logger: logger)
        }
        for settled in plan.settled {
            try await connection.query(
                """
                UPDATE store_notifications SET outcome = \(settled.outcome.rawValue), payment_seq = \(settled.paymentSeq)
                WHERE notification_id = \(settled.notificationId)
                """, logger: logger)
        }
        if plan.clearsRefundedRejections, let key {
            try await connection.query(
                """
                DELETE FROM rejections
                WHERE payment_id = \(key.paymentId) AND verdict_market_id = \(key.marketId) AND reason = 'refunded'
                """, logger: logger)
        }
        for event in plan.events { try await insert(event, connection, logger) }
    }

    public func notifications(paymentKey: StorePaymentKey) async throws -> [StoreNotificationRecord] {
        try await wrap {
            var records: [StoreNotificationRecord] = []
            for try await row in try await client.query(
                """
                SELECT \(unescaped: LedgerSchema.notificationColumns) FROM store_notifications
                WHERE market_id = \(paymentKey.marketId) AND payment_id = \(paymentKey.paymentId)
                ORDER BY received_at_ms, notification_id
                """, logger: logger)
            {
                records.append(try Self.notificationRow(row).record())
            }
            return records
        }
    }

    public func notification(id: String) async throws -> StoreNotificationRecord? {
        try await wrap {
            try await client.withConnection { connection in try await Self.fetchNotification(id, connection, logger) }
        }
    }

    public func revocations(paymentSeq: String) async throws -> [RevocationRecord] {
        try await wrap {
            try await client.withConnection { connection in
                try await Self.fetchRevocations(paymentSeq, connection, logger)
            }
        }
    }

    public func recordRefusal(_ refusal: RefusedNotification) async throws {
        let r = refusal
        try await wrap {
            try await client.query(
                """
                INSERT INTO refused_notifications (\(unescaped: LedgerSchema.refusalColumns), last_source, claimed_id)
                VALUES (
                    \(r.bodyHash), \(r.store?.rawValue), \(r.code), \(r.detail), \(Int64(r.bodyBytes)),
                    \(r.firstReceivedAt.epochMilliseconds), \(r.lastReceivedAt.epochMilliseconds), 1, \(r.source),
                    \(r.claimedId))
                ON CONFLICT (body_hash) DO UPDATE SET refused_count = refused_notifications.refused_count + 1,
                    last_received_at_ms = greatest(refused_notifications.last_received_at_ms, excluded.last_received_at_ms),
                    last_source = coalesce(excluded.last_source, refused_notifications.last_source),
                    claimed_id = coalesce(refused_notifications.claimed_id, excluded.claimed_id)
                """, logger: logger)
        }
    }

    public func refusals(limit: Int) async throws -> [RefusedNotification] {
        try await refusals(
            tolerating: false,
            """
            SELECT \(unescaped: LedgerSchema.refusalColumns), last_source, claimed_id FROM refused_notifications
            ORDER BY last_received_at_ms DESC, body_hash LIMIT \(Int64(max(0, limit)))
            """)
    }

    public func refusals(claimedId: String, limit: Int) async throws -> [RefusedNotification] {
        try await refusals(
            tolerating: true,
            """
            SELECT \(unescaped: LedgerSchema.refusalColumns), last_source, claimed_id FROM refused_notifications
            WHERE claimed_id = \(claimedId) ORDER BY last_received_at_ms DESC, body_hash LIMIT \(Int64(max(0, limit)))
            """)
    }

    /// - Parameter tolerating: a ledger not migrated to 010 (no `claimed_id`) answers none rather than failing.
    private func refusals(tolerating: Bool, _ query: PostgresQuery) async throws -> [RefusedNotification] {
        try await wrap {
            var refusals: [RefusedNotification] = []
            let rows: PostgresRowSequence
            do {
                rows = try await client.query(query, logger: logger)
            } catch  where Self.namesAMissingColumn(error) {
                // A ledger not migrated to 010 yet (`find` migrates nothing): no refusal claims an id there.
                return []
            }
            for try await row in rows {
                let r = row.makeRandomAccess()
                refusals.append(
                    RefusedNotification(
                        bodyHash: try r["body_hash"].decode(String.self),
                        store: try r["store"].decode(String?.self).flatMap(Store.init(rawValue:)),
                        code: try r["code"].decode(String.self), detail: try r["detail"].decode(String.self),
                        bodyBytes: Int(try r["body_bytes"].decode(Int64.self)),
                        firstReceivedAt: Date(epochMilliseconds: try r["first_received_at_ms"].decode(Int64.self)),
                        lastReceivedAt: Date(epochMilliseconds: try r["last_received_at_ms"].decode(Int64.self)),
                        count: Int(try r["refused_count"].decode(Int64.self)),
                        source: try r["last_source"].decode(String?.self),
                        claimedId: try r["claimed_id"].decode(String?.self)))
            }
            return refusals
        }
    }

    public func claimHistoryPoll(name: String, owner: String, until: Date, now: Date) async throws
        -> HistoryPollMark?
    {
        try await wrap {
            try await client.query(
                "INSERT INTO store_poll_marks (name) VALUES (\(name)) ON CONFLICT (name) DO NOTHING", logger: logger)
            var mark: HistoryPollMark?
            for try await row in try await client.query(
                """
                UPDATE store_poll_marks SET lease_owner = \(owner), lease_until_ms = \(until.epochMilliseconds)
                WHERE name = \(name)
                  AND (lease_owner IS NULL OR lease_owner = \(owner) OR lease_until_ms < \(now.epochMilliseconds)
                       OR lease_until_ms > \(LeaseEnd.latest(now: now.epochMilliseconds, until: until.epochMilliseconds)))
                RETURNING name, window_start_ms, window_end_ms, pagination_token, last_success_ms, read_through_ms
                """, logger: logger)
            {
                mark = try Self.pollMark(from: row)
            }
            return mark
        }
    }

    public func saveHistoryPoll(_ mark: HistoryPollMark, owner: String, leaseUntil: Date?) async throws -> Bool {
        let until = leaseUntil?.epochMilliseconds
        return try await wrap {
            var saved = false
            for try await _ in try await client.query(
                """
                UPDATE store_poll_marks SET window_start_ms = \(mark.windowStart?.epochMilliseconds),
                    window_end_ms = \(mark.windowEnd?.epochMilliseconds), pagination_token = \(mark.paginationToken),
                    last_success_ms = \(mark.lastSuccess?.epochMilliseconds),
                    read_through_ms = \(mark.readThrough?.epochMilliseconds),
                    lease_owner = \(until == nil ? nil : owner), lease_until_ms = \(until)
                WHERE name = \(mark.name) AND lease_owner = \(owner)
                RETURNING 1
                """, logger: logger)
            {
                saved = true
            }
            return saved
        }
    }

    public func historyPolls() async throws -> [HistoryPollMark] {
        try await wrap {
            var marks: [HistoryPollMark] = []
            for try await row in try await client.query(
                """
                SELECT name, window_start_ms, window_end_ms, pagination_token, last_success_ms, read_through_ms
                FROM store_poll_marks ORDER BY name
                """, logger: logger)
            {
                marks.append(try Self.pollMark(from: row))
            }
            return marks
        }
    }

    public func claimConsumptionRequests(now: Date, until: Date, limit: Int) async throws -> [ConsumptionRequest] {
        let (nowMs, untilMs) = (now.epochMilliseconds, until.epochMilliseconds)
        return try await wrap {
            var requests: [ConsumptionRequest] = []
            for try await (id, transaction, deadline, attempts) in try await client.query(
                """
                WITH due AS (
                    SELECT n.notification_id, n.payment_id, n.occurred_at_ms FROM store_notifications n
                    LEFT JOIN consumption_answers a ON a.notification_id = n.notification_id
                    WHERE n.kind = 'consumption_request' AND n.store = 'apple' AND n.payment_id IS NOT NULL
                      AND n.occurred_at_ms + \(unescaped: Self.answerWindow) > \(nowMs)
                      AND (a.notification_id IS NULL OR (a.state = 'pending' AND a.next_attempt_ms <= \(nowMs)))
                    ORDER BY n.occurred_at_ms, n.notification_id LIMIT \(Int64(max(0, limit)))
                )
                INSERT INTO consumption_answers (notification_id, transaction_id, deadline_ms, state, attempts,
                    next_attempt_ms)
                SELECT notification_id, payment_id, occurred_at_ms + \(unescaped: Self.answerWindow), 'pending', 0, \(untilMs) FROM due
                ON CONFLICT (notification_id) DO UPDATE SET next_attempt_ms = excluded.next_attempt_ms
                WHERE consumption_answers.state = 'pending' AND consumption_answers.next_attempt_ms <= \(nowMs)
                RETURNING notification_id, transaction_id, deadline_ms, attempts
                """, logger: logger
            ).decode((String, String, Int64, Int32).self) {
                requests.append(
                    ConsumptionRequest(
                        notificationId: id, transactionId: transaction, deadline: Date(epochMilliseconds: deadline),
                        attempts: Int(attempts), claimedUntil: Date(epochMilliseconds: untilMs)))
            }
            return requests.sorted { $0.deadline < $1.deadline }
        }
    }

    public func recordConsumptionAnswer(_ answer: ConsumptionAnswer, claim request: ConsumptionRequest) async throws
        -> Bool
    {
        let a = answer
        return try await wrap {
            var recorded = false
            for try await _ in try await client.query(
                """
                UPDATE consumption_answers SET state = \(a.state.rawValue), delivery_status = \(a.deliveryStatus),
                    attempts = \(Int32(clamping: a.attempts)), last_error = \(a.lastError),
                    answered_at_ms = \(a.answeredAt?.epochMilliseconds), next_attempt_ms = \(a.nextAttemptAt?.epochMilliseconds)
                WHERE notification_id = \(a.notificationId) AND state = 'pending'
                  AND next_attempt_ms = \(request.claimedUntil.epochMilliseconds)
                RETURNING 1
                """, logger: logger)
            {
                recorded = true
            }
            return recorded
        }
    }

    public func nearestConsumptionDeadline(now: Date) async throws -> Date? {
        try await wrap {
            var nearest: Int64?
            for try await value in try await client.query(
                """
                SELECT min(n.occurred_at_ms) + \(unescaped: Self.answerWindow) FROM store_notifications n
                LEFT JOIN consumption_answers a ON a.notification_id = n.notification_id
                WHERE n.kind = 'consumption_request' AND n.store = 'apple' AND n.payment_id IS NOT NULL
                  AND n.occurred_at_ms + \(unescaped: Self.answerWindow) > \(now.epochMilliseconds)
                  AND (a.notification_id IS NULL OR a.state = 'pending')
                """, logger: logger
            ).decode(Int64?.self) {
                nearest = value
            }
            return nearest.map(Date.init(epochMilliseconds:))
        }
    }

    public func consumptionAnswer(notificationId: String) async throws -> ConsumptionAnswer? {
        try await wrap {
            for try await row in try await client.query(
                """
                SELECT notification_id, transaction_id, state, delivery_status, attempts, last_error, answered_at_ms,
                    next_attempt_ms
                FROM consumption_answers WHERE notification_id = \(notificationId)
                """, logger: logger)
            {
                let r = row.makeRandomAccess()
                return ConsumptionAnswer(
                    notificationId: try r["notification_id"].decode(String.self),
                    transactionId: try r["transaction_id"].decode(String.self),
                    state: ConsumptionAnswer.State(rawValue: try r["state"].decode(String.self)) ?? .pending,
                    deliveryStatus: try r["delivery_status"].decode(String?.self),
                    attempts: Int(try r["attempts"].decode(Int32.self)),
                    lastError: try r["last_error"].decode(String?.self),
                    answeredAt: try r["answered_at_ms"].decode(Int64?.self).map(Date.init(epochMilliseconds:)),
                    nextAttemptAt: try r["next_attempt_ms"].decode(Int64?.self).map(Date.init(epochMilliseconds:)))
            }
            return nil
        }
    }

    public func grant(paymentKey: StorePaymentKey) async throws -> GrantRecord? {
        try await wrap {
            try await client.withConnection { connection in
                try await Self.refundContext(paymentKey, connection, logger).grant
            }
        }
    }

    static func pollMark(from row: PostgresRow) throws -> HistoryPollMark {
        let r = row.makeRandomAccess()
        return HistoryPollMark(
            name: try r["name"].decode(String.self),
            windowStart: try r["window_start_ms"].decode(Int64?.self).map(Date.init(epochMilliseconds:)),
            windowEnd: try r["window_end_ms"].decode(Int64?.self).map(Date.init(epochMilliseconds:)),
            paginationToken: try r["pagination_token"].decode(String?.self),
            lastSuccess: try r["last_success_ms"].decode(Int64?.self).map(Date.init(epochMilliseconds:)),
            readThrough: try r["read_through_ms"].decode(Int64?.self).map(Date.init(epochMilliseconds:)))
    }

    // MARK: Statements

    static func refundContext(_ key: StorePaymentKey?, _ connection: PostgresConnection, _ logger: Logger) async throws
        -> RefundContext
    {
        guard let key else { return RefundContext() }
        var grant: GrantRecord?
        for try await row in try await connection.query(
            """
            SELECT \(unescaped: LedgerSchema.grantColumns) FROM grants
            WHERE payment_id = \(key.paymentId) AND market_id = \(key.marketId)
            ORDER BY granted_at_ms, payment_seq LIMIT 1
            """, logger: logger)
        {
            grant = try Self.grant(from: row)
        }
        var notices: [StoreNotificationRecord] = []
        for try await row in try await connection.query(
            """
            SELECT \(unescaped: LedgerSchema.notificationColumns) FROM store_notifications
            WHERE market_id = \(key.marketId) AND payment_id = \(key.paymentId) AND kind IN ('refund', 'refund_reversed')
            """, logger: logger)
        {
            notices.append(try notificationRow(row).record())
        }
        var revocations: [RevocationRecord] = []
        if let grant { revocations = try await fetchRevocations(grant.paymentSeq, connection, logger) }
        return RefundContext(grant: grant, revocations: revocations, notices: notices)
    }

    static func fetchNotification(_ id: String, _ connection: PostgresConnection, _ logger: Logger) async throws
        -> StoreNotificationRecord?
    {
        try await fetchNotificationRow(id, connection, logger)?.record()
    }

    /// The notification's row, read to the end of the answer before anything is made of it.
    static func fetchNotificationRow(_ id: String, _ connection: PostgresConnection, _ logger: Logger) async throws
        -> NotificationRow?
    {
        var found: NotificationRow?
        for try await row in try await connection.query(
            """
            SELECT \(unescaped: LedgerSchema.notificationColumns) FROM store_notifications WHERE notification_id = \(id)
            """, logger: logger)
        {
            found = try notificationRow(row)
        }
        return found
    }

    static func fetchRevocations(_ paymentSeq: String, _ connection: PostgresConnection, _ logger: Logger) async throws
        -> [RevocationRecord]
    {
        var revocations: [RevocationRecord] = []
        for try await row in try await connection.query(
            """
            SELECT \(unescaped: LedgerSchema.revocationColumns), number FROM \(unescaped: LedgerSchema.allRevocations)
            WHERE payment_seq = \(paymentSeq) ORDER BY number
            """,
            logger: logger)
        {
            let r = row.makeRandomAccess()
            revocations.append(
                try RevocationRow(
                    paymentSeq: r["payment_seq"].decode(String.self), number: r["number"].decode(Int64.self),
                    userId: r["user_id"].decode(String.self), store: r["store"].decode(String.self),
                    notificationId: r["notification_id"].decode(String.self), reason: r["reason"].decode(String.self),
                    storeReason: r["store_reason"].decode(String?.self), quantity: r["quantity"].decode(Int64?.self),
                    revokedAtMilliseconds: r["revoked_at_ms"].decode(Int64.self),
                    recordedAtMilliseconds: r["recorded_at_ms"].decode(Int64.self),
                    reversedBy: r["reversed_by"].decode(String?.self),
                    reversedAtMilliseconds: r["reversed_at_ms"].decode(Int64?.self)
                ).record())
        }
        return revocations
    }

    static func notificationRow(_ row: PostgresRow) throws -> NotificationRow {
        let r = row.makeRandomAccess()
        return NotificationRow(
            notificationId: try r["notification_id"].decode(String.self), store: try r["store"].decode(String.self),
            kind: try r["kind"].decode(String.self), storeType: try r["store_type"].decode(String.self),
            authenticity: try r["authenticity"].decode(String.self), channel: try r["channel"].decode(String.self),
            deliveryId: try r["delivery_id"].decode(String?.self), paymentId: try r["payment_id"].decode(String?.self),
            purchaseTokenHash: try r["purchase_token_hash"].decode(String?.self),
            application: try r["application"].decode(String?.self),
            environment: try r["environment"].decode(String?.self), productId: try r["product_id"].decode(String?.self),
            storeReason: try r["store_reason"].decode(String?.self), quantity: try r["quantity"].decode(Int64?.self),
            occurredAtMilliseconds: try r["occurred_at_ms"].decode(Int64.self),
            receivedAtMilliseconds: try r["received_at_ms"].decode(Int64.self),
            outcome: try r["outcome"].decode(String.self), paymentSeq: try r["payment_seq"].decode(String?.self))
    }

    /// Inserts the notification; `false` when its id is recorded already.
    static func insert(_ record: StoreNotificationRecord, _ connection: PostgresConnection, _ logger: Logger)
        async throws -> Bool
    {
        let n = record.notification
        var inserted = false
        for try await _ in try await connection.query(
            """
            INSERT INTO store_notifications (\(unescaped: LedgerSchema.notificationColumns)) VALUES (
                \(n.notificationId), \(n.store.rawValue), \(n.store.marketId), \(n.kind.rawValue), \(n.storeType),
                \(n.authenticity.rawValue), \(record.channel.rawValue), \(n.deliveryId), \(n.paymentId),
                \(n.purchaseTokenHash), \(n.application), \(n.environment), \(n.productId), \(n.reason),
                \(n.quantity.map { Int64($0) }), \(n.occurredAt.epochMilliseconds), \(record.receivedAt.epochMilliseconds),
                \(record.outcome.rawValue), \(record.paymentSeq))
            ON CONFLICT (notification_id) DO NOTHING
            RETURNING 1
            """, logger: logger)
        {
            inserted = true
        }
        return inserted
    }
}

// MARK: The console's refunds page

extension PostgresLedgerStore {
    public func latestRefunds(limit: Int) async throws -> [RefundListing] {
        try await wrap {
            var listings: [RefundListing] = []
            for try await row in try await client.query(
                """
                SELECT \(unescaped: LedgerSchema.notificationColumns), \(unescaped: LedgerSchema.grantUserOfNotification)
                FROM store_notifications WHERE \(unescaped: LedgerSchema.refundKinds)
                ORDER BY received_at_ms DESC, notification_id COLLATE "C" DESC LIMIT \(Int64(max(0, limit)))
                """, logger: logger)
            {
                listings.append(
                    RefundListing(
                        record: try Self.notificationRow(row).record(),
                        userId: try row.makeRandomAccess()["grant_user_id"].decode(String?.self)))
            }
            return listings
        }
    }

    public func refundCounts(since: Date) async throws -> [RefundDayCount] {
        let day = String(RefundDayCount.dayMilliseconds)
        return try await wrap {
            var counts: [RefundDayCount] = []
            for try await (days, kind, outcome, count) in try await client.query(
                """
                SELECT received_at_ms / \(unescaped: day), kind, outcome, count(*)
                FROM store_notifications
                WHERE \(unescaped: LedgerSchema.refundKinds) AND received_at_ms >= \(since.epochMilliseconds)
                GROUP BY 1, 2, 3
                """, logger: logger
            ).decode((Int64, String, String, Int64).self) {
                if let count = NotificationRow.dayCount(day: days, kind: kind, outcome: outcome, count: count) {
                    counts.append(count)
                }
            }
            return counts
        }
    }

    public func refundingUsers(since: Date, limit: Int) async throws -> [RefundingUser] {
        try await wrap {
            var users: [RefundingUser] = []
            for try await (userId, count, reversed, last) in try await client.query(
                """
                SELECT user_id, count(*) AS n, count(reversed_by), max(recorded_at_ms)
                FROM \(unescaped: LedgerSchema.allRevocations) WHERE recorded_at_ms >= \(since.epochMilliseconds)
                GROUP BY user_id ORDER BY n DESC, user_id COLLATE "C" LIMIT \(Int64(max(0, limit)))
                """, logger: logger
            ).decode((String, Int64, Int64, Int64).self) {
                users.append(
                    RefundingUser(
                        userId: userId, revocations: Int(count), reversed: Int(reversed),
                        lastRecordedAt: Date(epochMilliseconds: last)))
            }
            return users
        }
    }
}

import Foundation
import Fulfilment
import Synchronization

// MARK: The refunds role

extension MemoryLedger {
    public func record(_ record: StoreNotificationRecord, events: EventFactory, now: Date) async throws
        -> RefundRecording
    {
        state.withLock { state in
            let id = BinaryText(record.notification.notificationId)
            if let existing = state.notifications[id]?.record {
                return RefundRecording(outcome: existing.outcome, duplicate: true, paymentSeq: existing.paymentSeq)
            }
            let plan = RefundPlan.decide(
                record, context: state.refundContext(record.paymentKey), events: events, now: now)
            var stored = record
            stored.outcome = plan.outcome
            stored.paymentSeq = plan.paymentSeq
            stored.receivedAt = record.receivedAt.storedInMilliseconds
            stored.notification.occurredAt = record.notification.occurredAt.storedInMilliseconds
            state.notifications[id] = (stored, state.nextRow())
            state.carryOut(plan, payment: record.paymentKey)
            return RefundRecording(plan)
        }
    }

    public func settlePendingRefunds(limit: Int, events: EventFactory, now: Date) async throws -> [RefundRecording] {
        state.withLock { state in
            var first: [StorePaymentKey: (receivedAt: Date, paymentId: BinaryText)] = [:]
            for row in state.notifications.values {
                guard row.record.outcome == .pending || row.record.outcome == .pendingPartial,
                    let key = row.record.paymentKey, state.refundContext(key).grant != nil
                else { continue }
                let at = row.record.receivedAt
                if let known = first[key], known.receivedAt <= at { continue }
                first[key] = (at, BinaryText(key.paymentId))
            }
            let due = first.sorted {
                ($0.value.receivedAt, $0.value.paymentId) < ($1.value.receivedAt, $1.value.paymentId)
            }
            return limited(due, max(0, limit)).compactMap { key, _ in
                guard let plan = RefundPlan.settle(context: state.refundContext(key), events: events, now: now) else {
                    return nil
                }
                state.carryOut(plan, payment: key)
                return RefundRecording(plan)
            }
        }
    }

    public func notifications(paymentKey: StorePaymentKey) async throws -> [StoreNotificationRecord] {
        state.withLock { state in
            state.notifications.values.filter { Self.names($0.record, paymentKey) }
                .sorted {
                    ($0.record.receivedAt, BinaryText($0.record.notification.notificationId))
                        < ($1.record.receivedAt, BinaryText($1.record.notification.notificationId))
                }
                .map(\.record)
        }
    }

    public func notification(id: String) async throws -> StoreNotificationRecord? {
        state.withLock { $0.notifications[BinaryText(id)]?.record }
    }

    public func revocations(paymentSeq: String) async throws -> [RevocationRecord] {
        state.withLock { $0.revocations[BinaryText(paymentSeq)] ?? [] }
    }

    public func recordRefusal(_ refusal: RefusedNotification) async throws {
        state.withLock { state in
            let key = BinaryText(refusal.bodyHash)
            if var existing = state.refusals[key] {
                existing.record.count += 1
                existing.record.lastReceivedAt = max(
                    existing.record.lastReceivedAt, refusal.lastReceivedAt.storedInMilliseconds)
                existing.record.source = refusal.source ?? existing.record.source
                existing.record.claimedId = existing.record.claimedId ?? refusal.claimedId
                state.refusals[key] = existing
            } else {
                var stored = refusal
                stored.count = 1
                stored.firstReceivedAt = refusal.firstReceivedAt.storedInMilliseconds
                stored.lastReceivedAt = refusal.lastReceivedAt.storedInMilliseconds
                state.refusals[key] = (stored, state.nextRow())
            }
        }
    }

    public func refusals(claimedId: String, limit: Int) async throws -> [RefusedNotification] {
        let claimed = BinaryText(claimedId)
        return try await refusals(limit: Int.max).filter { $0.claimedId.map(BinaryText.init) == claimed }.prefix(
            max(0, limit)
        ).map { $0 }
    }

    public func refusals(limit: Int) async throws -> [RefusedNotification] {
        state.withLock { state in
            let sorted = state.refusals.values.map(\.record).sorted {
                ($1.lastReceivedAt, BinaryText($0.bodyHash)) < ($0.lastReceivedAt, BinaryText($1.bodyHash))
            }
            return limited(sorted, max(0, limit))
        }
    }

    public func claimHistoryPoll(name: String, owner: String, until: Date, now: Date) async throws
        -> HistoryPollMark?
    {
        state.withLock { state in
            let key = BinaryText(name)
            var row = state.pollMarks[key] ?? PollRow(mark: HistoryPollMark(name: name))
            if let holder = row.leaseOwner, BinaryText(holder) != BinaryText(owner),
                let held = row.leaseUntil, held >= now.epochMilliseconds,
                held <= LeaseEnd.latest(now: now.epochMilliseconds, until: until.epochMilliseconds)
            {
                return nil
            }
            row.leaseOwner = owner
            row.leaseUntil = until.epochMilliseconds
            state.pollMarks[key] = row
            return row.mark
        }
    }

    public func saveHistoryPoll(_ mark: HistoryPollMark, owner: String, leaseUntil: Date?) async throws -> Bool {
        state.withLock { state in
            let key = BinaryText(mark.name)
            guard var row = state.pollMarks[key], let holder = row.leaseOwner, BinaryText(holder) == BinaryText(owner)
            else { return false }
            var stored = mark
            stored.windowStart = mark.windowStart?.storedInMilliseconds
            stored.windowEnd = mark.windowEnd?.storedInMilliseconds
            stored.lastSuccess = mark.lastSuccess?.storedInMilliseconds
            stored.readThrough = mark.readThrough?.storedInMilliseconds
            row.mark = stored
            row.leaseOwner = leaseUntil == nil ? nil : owner
            row.leaseUntil = leaseUntil?.epochMilliseconds
            state.pollMarks[key] = row
            return true
        }
    }

    public func historyPolls() async throws -> [HistoryPollMark] {
        state.withLock { state in state.pollMarks.sorted { $0.key < $1.key }.map(\.value.mark) }
    }

    public func claimConsumptionRequests(now: Date, until: Date, limit: Int) async throws -> [ConsumptionRequest] {
        let (nowMs, untilMs) = (now.epochMilliseconds, until.epochMilliseconds)
        return state.withLock { state in
            let due = state.notifications.values.map(\.record).filter { record in
                guard record.notification.kind == .consumptionRequest, record.notification.store == .apple,
                    record.notification.paymentId != nil,
                    record.notification.occurredAt.epochMilliseconds + ConsumptionRequest.answerWindowMilliseconds
                        > nowMs
                else { return false }
                guard let answer = state.consumptionAnswers[BinaryText(record.notification.notificationId)] else {
                    return true
                }
                guard answer.answer.state == .pending, let next = answer.answer.nextAttemptAt else { return false }
                return next.epochMilliseconds <= nowMs
            }
            .sorted {
                ($0.notification.occurredAt, BinaryText($0.notification.notificationId))
                    < ($1.notification.occurredAt, BinaryText($1.notification.notificationId))
            }
            return limited(due, max(0, limit)).map { record -> ConsumptionRequest in
                let key = BinaryText(record.notification.notificationId)
                let deadline = Date(
                    epochMilliseconds: record.notification.occurredAt.epochMilliseconds
                        + ConsumptionRequest.answerWindowMilliseconds)
                var row =
                    state.consumptionAnswers[key]
                    ?? ConsumptionRow(
                        answer: ConsumptionAnswer(
                            notificationId: record.notification.notificationId,
                            transactionId: record.notification.paymentId ?? "", state: .pending, attempts: 0),
                        deadline: deadline)
                row.answer.nextAttemptAt = Date(epochMilliseconds: untilMs)
                state.consumptionAnswers[key] = row
                return ConsumptionRequest(
                    notificationId: row.answer.notificationId, transactionId: row.answer.transactionId,
                    deadline: row.deadline, attempts: row.answer.attempts,
                    claimedUntil: Date(epochMilliseconds: untilMs))
            }
        }
    }

    public func recordConsumptionAnswer(_ answer: ConsumptionAnswer, claim request: ConsumptionRequest) async throws
        -> Bool
    {
        state.withLock { state in
            let key = BinaryText(answer.notificationId)
            guard var row = state.consumptionAnswers[key], row.answer.state == .pending,
                row.answer.nextAttemptAt?.epochMilliseconds == request.claimedUntil.epochMilliseconds
            else { return false }
            var stored = answer
            stored.transactionId = row.answer.transactionId
            stored.answeredAt = answer.answeredAt?.storedInMilliseconds
            stored.nextAttemptAt = answer.nextAttemptAt?.storedInMilliseconds
            row.answer = stored
            state.consumptionAnswers[key] = row
            return true
        }
    }

    public func nearestConsumptionDeadline(now: Date) async throws -> Date? {
        let nowMs = now.epochMilliseconds
        return state.withLock { state in
            state.notifications.values.map(\.record).filter { record in
                guard record.notification.kind == .consumptionRequest, record.notification.store == .apple,
                    record.notification.paymentId != nil,
                    record.notification.occurredAt.epochMilliseconds + ConsumptionRequest.answerWindowMilliseconds
                        > nowMs
                else { return false }
                let answer = state.consumptionAnswers[BinaryText(record.notification.notificationId)]
                return answer == nil || answer?.answer.state == .pending
            }
            .map {
                Date(
                    epochMilliseconds: $0.notification.occurredAt.epochMilliseconds
                        + ConsumptionRequest.answerWindowMilliseconds)
            }.min()
        }
    }

    public func consumptionAnswer(notificationId: String) async throws -> ConsumptionAnswer? {
        state.withLock { $0.consumptionAnswers[BinaryText(notificationId)]?.answer }
    }

    public func grant(paymentKey: StorePaymentKey) async throws -> GrantRecord? {
        state.withLock { $0.refundContext(paymentKey).grant }
    }

    /// A `consumption_answers` row.
    struct ConsumptionRow {
        var answer: ConsumptionAnswer
        let deadline: Date
    }

    /// A `store_poll_marks` row: the position and its lease.
    struct PollRow {
        var mark: HistoryPollMark
        var leaseOwner: String?
        var leaseUntil: Int64?
    }

    /// `market_id = ? AND payment_id = ?`, by bytes.
    static func names(_ record: StoreNotificationRecord, _ key: StorePaymentKey) -> Bool {
        BinaryText(record.notification.store.marketId) == BinaryText(key.marketId)
            && BinaryText(key.paymentId).matches(record.notification.paymentId)
    }
}

extension MemoryLedger.State {
    /// Writes what `plan` decided, beside the recorded notification's own row.
    mutating func carryOut(_ plan: RefundPlan, payment key: StorePaymentKey?) {
        for revocation in plan.revocations {
            let seq = BinaryText(revocation.paymentSeq)
            if !(revocations[seq] ?? []).contains(where: { $0.number == revocation.number }) {
                revocations[seq, default: []].append(revocation.asStored)
            }
        }
        for reversal in plan.reversals {
            let seq = BinaryText(reversal.paymentSeq)
            if let index = revocations[seq]?.firstIndex(where: { $0.number == reversal.number && $0.reversedBy == nil })
            {
                revocations[seq]?[index] = reversal.asStored
            }
        }
        if plan.resumesConsume, let paymentSeq = plan.paymentSeq {
            grants[BinaryText(paymentSeq)]?.consumeSetAsideAt = nil
        }
        for settled in plan.settled {
            notifications[BinaryText(settled.notificationId)]?.record.outcome = settled.outcome
            notifications[BinaryText(settled.notificationId)]?.record.paymentSeq = settled.paymentSeq
        }
        if plan.clearsRefundedRejections, let key {
            rejections = rejections.filter { _, row in
                !(row.record.reason == ConsumeFailureReason.refunded.rawValue
                    && BinaryText(key.paymentId).matches(row.record.verdict?.paymentId)
                    && BinaryText(key.marketId).matches(row.record.verdict?.marketId))
            }
        }
        for event in plan.events { insert(event) }
    }

    /// `SELECT min(notification_id) … WHERE market_id = ? AND payment_id = ? AND outcome = 'pending'`.
    func pendingRefund(_ key: StorePaymentKey) -> String? {
        notifications.values.filter { $0.record.outcome == .pending && MemoryLedger.names($0.record, key) }
            .map { BinaryText($0.record.notification.notificationId) }.min()?.text
    }

    func refundContext(_ key: StorePaymentKey?) -> RefundContext {
        guard let key else { return RefundContext() }
        let grant = grants.values.filter {
            BinaryText(key.paymentId).matches($0.record.paymentId)
                && BinaryText(key.marketId).matches($0.record.marketId)
        }
        .min {
            ($0.record.grantedAt, BinaryText($0.record.paymentSeq)) < (
                $1.record.grantedAt, BinaryText($1.record.paymentSeq)
            )
        }?
        .record
        let notices = notifications.values.map(\.record).filter {
            ($0.notification.kind == .refund || $0.notification.kind == .refundReversed) && MemoryLedger.names($0, key)
        }
        return RefundContext(
            grant: grant, revocations: grant.flatMap { revocations[BinaryText($0.paymentSeq)] } ?? [], notices: notices)
    }
}

extension RevocationRecord {
    var asStored: RevocationRecord {
        var revocation = self
        revocation.revokedAt = revokedAt.storedInMilliseconds
        revocation.recordedAt = recordedAt.storedInMilliseconds
        revocation.reversedAt = reversedAt?.storedInMilliseconds
        return revocation
    }
}

// MARK: The console's refunds page

extension MemoryLedger {
    public func latestRefunds(limit: Int) async throws -> [RefundListing] {
        state.withLock { state in
            let refunds = state.notifications.values.map(\.record).filter { $0.notification.kind.isRefund }
                .sorted {
                    ($1.receivedAt, BinaryText($1.notification.notificationId))
                        < ($0.receivedAt, BinaryText($0.notification.notificationId))
                }
            return limited(refunds, max(0, limit)).map { record in
                RefundListing(
                    record: record, userId: record.paymentSeq.flatMap { state.grants[BinaryText($0)]?.record.userId })
            }
        }
    }

    public func refundCounts(since: Date) async throws -> [RefundDayCount] {
        state.withLock { state in
            var counts: [RefundDayCount: Int] = [:]
            for record in state.notifications.values.map(\.record)
            where record.notification.kind.isRefund && record.receivedAt >= since.storedInMilliseconds {
                let key = RefundDayCount(
                    day: RefundDayCount.day(ofEpochMilliseconds: record.receivedAt.epochMilliseconds),
                    kind: record.notification.kind, outcome: record.outcome, count: 0)
                counts[key, default: 0] += 1
            }
            return counts.map { key, count in
                var day = key
                day.count = count
                return day
            }
        }
    }

    public func refundingUsers(since: Date, limit: Int) async throws -> [RefundingUser] {
        state.withLock { state in
            var users: [BinaryText: RefundingUser] = [:]
            for revocation in state.revocations.values.joined()
            where revocation.recordedAt >= since.storedInMilliseconds {
                let key = BinaryText(revocation.userId)
                var user =
                    users[key]
                    ?? RefundingUser(
                        userId: revocation.userId, revocations: 0, reversed: 0, lastRecordedAt: revocation.recordedAt)
                user.revocations += 1
                if revocation.reversedBy != nil { user.reversed += 1 }
                user.lastRecordedAt = max(user.lastRecordedAt, revocation.recordedAt)
                users[key] = user
            }
            let sorted = users.values.sorted {
                ($1.revocations, BinaryText($0.userId)) < ($0.revocations, BinaryText($1.userId))
            }
            return limited(sorted, max(0, limit))
        }
    }
}

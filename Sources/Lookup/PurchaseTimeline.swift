import Foundation
import Fulfilment
import Wire

/// One line of a purchase's story: when, where it came from, what happened.
public struct TimelineEntry: Sendable, Hashable, Codable {
    /// Where the fact comes from: `kafka` (a message read), `gamebase` (an answer), `ledger` (a state change),
    /// `reconciliation` (List Consumables), `reprocess`.
    public enum Origin: String, Sendable, Hashable, Codable {
        case kafka, gamebase, ledger, reconciliation, reprocess
        /// A store's notification (a refund, its reversal, Apple's consumption request) and the answers to it.
        case store
    }

    /// What kind of line it is (the JSON schema lists them).
    public enum Kind: String, Sendable, Hashable, Codable {
        case message, verdict, grant, event, consume, rejection
        case deadLetter = "dead_letter"
        case reprocessed, sighting
        case refund, revocation
        case consumptionAnswer = "consumption_answer"
        /// A store record that was not believed (``RefusedNotification``), found by the id it claims.
        case refusal
    }

    public var time: Date
    public var origin: Origin
    public var kind: Kind
    public var summary: String
    /// The line's facts by name (`topic`, `offset`, `token_hash`, `result_code`, …): strings, never a token.
    public var fields: [String: String]

    public init(time: Date, origin: Origin, kind: Kind, summary: String, fields: [String: String] = [:]) {
        self.time = time
        self.origin = origin
        self.kind = kind
        self.summary = summary
        self.fields = fields
    }
}

/// One purchase as a support agent reads it: who, its state in one phrase, and its story oldest first.
public struct PurchaseTimeline: Sendable, Hashable {
    public var paymentSeq: String?
    public var userId: String?
    public var paymentId: String?
    public var status: String
    public var entries: [TimelineEntry]
    /// Filled by `--gamebase`: what Gamebase says now.
    public var gamebase: GamebaseView?
    /// What the timeline was told from (it holds the grant's token: never shown, only used to ask Gamebase).
    public var history: PurchaseHistory?

    public init(
        paymentSeq: String?, userId: String?, paymentId: String?, status: String, entries: [TimelineEntry],
        gamebase: GamebaseView? = nil
    ) {
        self.paymentSeq = paymentSeq
        self.userId = userId
        self.paymentId = paymentId
        self.status = status
        self.entries = entries
        self.gamebase = gamebase
    }
}

extension PurchaseTimeline {
    /// The short form of a token's hash shown to people: enough to tell two tokens apart, nothing to replay.
    public static func shortHash(_ tokenHash: String) -> String { String(tokenHash.prefix(12)) }

    /// The story of `history`, oldest first (lines of one moment in the order the flow wrote them).
    public init(_ history: PurchaseHistory, reconcileGrace: Duration? = nil) {
        // Lines of one millisecond keep this order: what failed before the grant that followed it.
        var lines: [TimelineEntry] = []
        let grant = history.grant
        for deadLetter in history.deadLetters {
            lines += Self.deadLetterLines(deadLetter).filter { $0.kind != .reprocessed }
        }
        for rejection in history.rejections { lines += Self.rejectionLines(rejection, history) }
        if let grant { lines += Self.grantLines(grant, history) }
        let known = Set([grant.map { EventFactory.itemGrantedID(paymentSeq: $0.paymentSeq) }].compactMap { $0 })
            .union(history.rejections.map(\.record.eventID))
        for event in history.events where !known.contains(event.id) { lines.append(Self.eventLine(event)) }
        if let sighting = history.sighting {
            var fields = ["user_id": sighting.userId, "first_seen": RFC3339.string(sighting.firstSeen)]
            var summary = "seen unconsumed at Gamebase by List Consumables with no decision here; not taken yet"
            if let grace = reconcileGrace {
                let until = sighting.firstSeen.addingTimeInterval(Double(grace.components.seconds))
                fields["grace_until"] = RFC3339.string(until)
                summary += " (taken by the first pass after \(RFC3339.string(until)))"
            }
            lines.append(
                TimelineEntry(
                    time: sighting.firstSeen, origin: .reconciliation, kind: .sighting, summary: summary, fields: fields
                ))
        }
        // What reprocess made of a dead letter is recorded once the purchase it re-drove is decided: within one
        // millisecond it follows that purchase's lines.
        for deadLetter in history.deadLetters {
            lines += Self.deadLetterLines(deadLetter).filter { $0.kind == .reprocessed }
        }
        let ordered = Self.ordered(lines)
        self.init(
            paymentSeq: history.paymentSeq, userId: history.userId,
            paymentId: grant?.paymentId ?? history.rejections.lazy.compactMap(\.record.verdict?.paymentId).first,
            status: Self.status(history), entries: ordered)
        self.history = history
    }

    /// Lines in time order; lines of one moment keep the order they were given in.
    static func ordered(_ lines: [TimelineEntry]) -> [TimelineEntry] {
        lines.enumerated().sorted { a, b in
            a.element.time != b.element.time ? a.element.time < b.element.time : a.offset < b.offset
        }.map(\.element)
    }

    static func status(_ history: PurchaseHistory) -> String {
        if let grant = history.grant {
            switch grant.state {
            case .consumed: return "granted and consumed"
            case .granted where history.consumeSetAsideAt != nil:
                return
                    "granted, Consume set aside: Gamebase refused it after a refund revoked the grant (\(grant.consumeAttempts) failed attempt\(grant.consumeAttempts == 1 ? "" : "s"); not retried)"
            case .granted:
                return
                    "granted, Consume pending (\(grant.consumeAttempts) failed attempt\(grant.consumeAttempts == 1 ? "" : "s"))"
            }
        }
        if let last = history.deadLetters.last {
            if let outcome = last.reprocessOutcome { return "dead-lettered (\(last.reason)), reprocessed: \(outcome)" }
            return "dead-lettered (\(last.reason)), waiting for reprocess"
        }
        if let rejection = history.rejections.last { return "rejected (\(rejection.record.reason))" }
        if history.sighting != nil { return "paid, seen by reconciliation, not granted yet" }
        return "unknown to the ledger"
    }

    static func messageFields(_ source: MessageSource?, timestamp: Int64?, userId: String, tokenHash: String)
        -> [String: String]
    {
        var fields = ["user_id": userId, "token_hash": shortHash(tokenHash)]
        if let source {
            fields["topic"] = source.topic
            fields["partition"] = String(source.partition)
            fields["offset"] = String(source.offset)
        }
        if let timestamp { fields["message_time"] = RFC3339.string(epochMilliseconds: timestamp) }
        return fields
    }

    static func position(_ source: MessageSource?) -> String {
        source.map { "\($0.topic)[\($0.partition)]@\($0.offset)" } ?? "an unknown record"
    }

    static func grantLines(_ grant: GrantRecord, _ history: PurchaseHistory) -> [TimelineEntry] {
        var lines: [TimelineEntry] = []
        let tokenHash = grant.tokenHash
        let duplicates = history.grantDuplicates
        let after = duplicates > 0 ? "; \(duplicates) duplicate\(duplicates == 1 ? "" : "s") arrived after it" : ""
        switch grant.origin {
        case .message:
            var fields = messageFields(
                grant.source, timestamp: grant.messageTimestampMilliseconds, userId: grant.userId, tokenHash: tokenHash)
            fields["duplicates_after"] = String(duplicates)
            let time =
                grant.messageTimestampMilliseconds.map(Date.init(epochMilliseconds:)).map { min($0, grant.grantedAt) }
                ?? grant.grantedAt
            lines.append(
                TimelineEntry(
                    time: time, origin: .kafka, kind: .message,
                    summary:
                        "purchase message \(position(grant.source)), userId \(grant.userId), token \(shortHash(tokenHash))\(after)",
                    fields: fields))
        case .reconciliation:
            lines.append(
                TimelineEntry(
                    time: grant.grantedAt, origin: .reconciliation, kind: .sighting,
                    summary: "found unconsumed at Gamebase by List Consumables: no message reported it\(after)",
                    fields: [
                        "user_id": grant.userId, "token_hash": shortHash(tokenHash),
                        "duplicates_after": String(duplicates),
                    ]))
        }
        var extra = ["test_purchase": grant.isTestPurchase ? "true" : "false"]
        extra["product_type"] = grant.productType
        extra["purchase_time"] = grant.purchaseTime
        lines.append(
            verdictLine(
                at: grant.grantedAt, paidBy: grant.userId,
                PaymentVerdict(
                    paymentId: grant.paymentId, gamebaseProductId: grant.gamebaseProductId, marketId: grant.marketId,
                    price: grant.price, currency: grant.currency),
                extra: extra))
        lines.append(
            TimelineEntry(
                time: grant.grantedAt, origin: .ledger, kind: .grant,
                summary: "granted \(grant.gamebaseProductId) to userId \(grant.userId)",
                fields: ["product": grant.gamebaseProductId, "user_id": grant.userId, "source": grant.origin.rawValue]))
        let eventID = EventFactory.itemGrantedID(paymentSeq: grant.paymentSeq)
        let event = history.events.first { $0.id == eventID }
        if let published = grant.eventPublishedAt ?? event?.publishedAt {
            lines.append(
                TimelineEntry(
                    time: published, origin: .ledger, kind: .event,
                    summary: "item-granted event \(eventID) published to \(event?.topic ?? "the item-granted topic")",
                    fields: ["event_id": eventID, "topic": event?.topic ?? "", "published": "true"]))
        } else {
            lines.append(
                TimelineEntry(
                    time: event?.createdAt ?? grant.grantedAt, origin: .ledger, kind: .event,
                    summary: "item-granted event \(eventID) written, NOT YET PUBLISHED (the sweeper sends it)",
                    fields: ["event_id": eventID, "topic": event?.topic ?? "", "published": "false"]))
        }
        let attempts = history.consumeAttempts
        for attempt in attempts {
            var fields = ["attempt": String(attempt.attempt), "consumed": "false"]
            fields["result_code"] = attempt.resultCode.map(String.init)
            let summary: String
            if let code = attempt.resultCode {
                summary = "Consume #\(attempt.attempt) failed (resultCode \(code))"
            } else {
                summary = "Consume #\(attempt.attempt) failed (no answer from Gamebase)"
            }
            // A failed attempt is timed by the database's clock (the trigger that keeps it), the rest by the worker's;
            // Consume is only ever called once the grant's event went out, so no attempt is shown before that.
            let time = max(attempt.at, grant.eventPublishedAt ?? grant.grantedAt)
            lines.append(TimelineEntry(time: time, origin: .gamebase, kind: .consume, summary: summary, fields: fields))
        }
        if grant.state == .consumed, let consumedAt = grant.consumedAt {
            // The successful attempt is the grant row's: its time, its code, and the count of attempts. It is the last
            // one: never shown before the failed ones (timed by the database's clock) or the event it follows.
            let code = grant.lastResultCode.map(String.init) ?? "0"
            let floor = max(grant.eventPublishedAt ?? grant.grantedAt, attempts.last?.at ?? .distantPast)
            lines.append(
                TimelineEntry(
                    time: max(consumedAt, floor), origin: .gamebase, kind: .consume,
                    summary: "Consume #\(grant.consumeAttempts) succeeded (resultCode \(code))",
                    fields: ["attempt": String(grant.consumeAttempts), "consumed": "true", "result_code": code]))
        }
        if grant.state == .granted, let setAside = history.consumeSetAsideAt {
            let code = grant.lastResultCode.map { " (resultCode \($0))" } ?? ""
            lines.append(
                TimelineEntry(
                    time: max(setAside, attempts.last?.at ?? grant.grantedAt), origin: .ledger, kind: .consume,
                    summary:
                        "Consume set aside: Gamebase refused it for good\(code) and a refund revoked the grant; the sweeper no longer retries it (a reversal of the refund does)",
                    fields: [
                        "pending": "false", "set_aside": "true", "attempts": String(grant.consumeAttempts),
                        "result_code": grant.lastResultCode.map(String.init) ?? "",
                    ]))
        } else if grant.state == .granted {
            let last = attempts.last?.at ?? grant.grantedAt
            lines.append(
                TimelineEntry(
                    time: last, origin: .ledger, kind: .consume,
                    summary:
                        "Consume still pending after \(grant.consumeAttempts) failed attempt\(grant.consumeAttempts == 1 ? "" : "s"); the sweeper retries it",
                    fields: ["pending": "true", "attempts": String(grant.consumeAttempts)]))
        }
        return lines
    }

    static func rejectionLines(_ rejection: RejectionHistory, _ history: PurchaseHistory) -> [TimelineEntry] {
        let r = rejection.record
        var lines: [TimelineEntry] = []
        let after =
            rejection.duplicates > 0
            ? "; \(rejection.duplicates) duplicate\(rejection.duplicates == 1 ? "" : "s") arrived after it" : ""
        var fields = messageFields(
            r.source, timestamp: r.messageTimestampMilliseconds, userId: r.key.userId, tokenHash: r.key.tokenHash)
        fields["duplicates_after"] = String(rejection.duplicates)
        if r.source != nil {
            let time =
                r.messageTimestampMilliseconds.map(Date.init(epochMilliseconds:)).map { min($0, r.rejectedAt) }
                ?? r.rejectedAt
            lines.append(
                TimelineEntry(
                    time: time, origin: .kafka, kind: .message,
                    summary:
                        "claim message \(position(r.source)), userId \(r.key.userId), token \(shortHash(r.key.tokenHash))\(after)",
                    fields: fields))
        }
        if let verdict = r.verdict {
            lines.append(verdictLine(at: r.rejectedAt, paidBy: nil, verdict))
        } else if let code = r.resultCode {
            lines.append(
                TimelineEntry(
                    time: r.rejectedAt, origin: .gamebase, kind: .verdict,
                    summary:
                        "Get Payment Transaction refused the token: resultCode \(code)\(r.resultMessage.map { " (\($0))" } ?? "")",
                    fields: ["result_code": String(code)]))
        }
        var facts = [
            "reason": r.reason, "user_id": r.key.userId, "token_hash": shortHash(r.key.tokenHash),
            "event_id": r.eventID,
        ]
        facts["detail"] = r.detail
        lines.append(
            TimelineEntry(
                time: r.rejectedAt, origin: .ledger, kind: .rejection,
                summary:
                    "claim by userId \(r.key.userId) rejected: \(r.reason)\(r.detail.map { " — \($0)" } ?? "")\(r.source == nil ? after : "")",
                fields: facts))
        if let event = history.events.first(where: { $0.id == r.eventID }) { lines.append(eventLine(event)) }
        return lines
    }

    /// What Get Payment Transaction answered (resultCode 0) about the payment a grant or rejection was judged on.
    static func verdictLine(
        at time: Date, paidBy userId: String?, _ verdict: PaymentVerdict, extra: [String: String] = [:]
    ) -> TimelineEntry {
        var fields = extra
        fields["result_code"] = "0"
        fields["user_id"] = userId
        fields["product"] = verdict.gamebaseProductId
        fields["store"] = verdict.marketId
        fields["price"] = verdict.price
        fields["currency"] = verdict.currency
        fields["payment_id"] = verdict.paymentId
        let head =
            userId.map { "Get Payment Transaction: paid by userId \($0) (resultCode 0)," }
            ?? "Get Payment Transaction (resultCode 0):"
        return TimelineEntry(
            time: time, origin: .gamebase, kind: .verdict,
            summary: "\(head) product \(verdict.gamebaseProductId ?? "-"), store \(verdict.marketId ?? "-"), "
                + "price \(verdict.price ?? "-") \(verdict.currency ?? ""), paymentId \(verdict.paymentId ?? "-")",
            fields: fields)
    }

    static func eventLine(_ event: EventSummary) -> TimelineEntry {
        let kind = event.id.hasSuffix(":item-granted") ? "item-granted" : "consume-failed"
        if let published = event.publishedAt {
            return TimelineEntry(
                time: published, origin: .ledger, kind: .event,
                summary: "\(kind) event \(event.id) published to \(event.topic)",
                fields: ["event_id": event.id, "topic": event.topic, "published": "true"])
        }
        return TimelineEntry(
            time: event.createdAt, origin: .ledger, kind: .event,
            summary: "\(kind) event \(event.id) written, NOT YET PUBLISHED (the sweeper sends it)",
            fields: ["event_id": event.id, "topic": event.topic, "published": "false"])
    }

    static func deadLetterLines(_ entry: DeadLetterEntry) -> [TimelineEntry] {
        var fields = [
            "reason": entry.reason, "attempts": String(entry.attempts), "dead_letter_topic": entry.deadLetterTopic,
            "value_bytes": String(entry.valueBytes),
        ]
        fields["dead_letter_partition"] = entry.deadLetterPartition.map { String($0) }
        fields["dead_letter_offset"] = entry.deadLetterOffset.map { String($0) }
        fields["user_id"] = entry.userId
        fields["token_hash"] = entry.tokenHash.map(shortHash)
        fields["error"] = entry.error.isEmpty ? nil : entry.error
        if let original = entry.original {
            fields["topic"] = original.topic
            fields["partition"] = String(original.partition)
            fields["offset"] = String(original.offset)
        }
        fields["message_time"] = entry.originalTimestampMilliseconds.map { RFC3339.string(epochMilliseconds: $0) }
        if entry.valueOmitted { fields["value_omitted"] = "true" }
        let target =
            entry.location.map { "\($0.topic)[\($0.partition)]@\($0.offset)" } ?? entry.deadLetterTopic
        var lines = [
            TimelineEntry(
                time: entry.failedAt, origin: .ledger, kind: .deadLetter,
                summary:
                    "dead-lettered for \(entry.reason) after \(entry.attempts) attempt\(entry.attempts == 1 ? "" : "s") "
                    + "to \(target) (message \(position(entry.original)))\(entry.error.isEmpty ? "" : ": \(entry.error)")",
                fields: fields)
        ]
        if let outcome = entry.reprocessOutcome, let at = entry.reprocessedAt {
            lines.append(
                TimelineEntry(
                    time: at, origin: .reprocess, kind: .reprocessed,
                    summary: "re-driven by iap-worker reprocess: \(outcome)",
                    fields: ["outcome": outcome]))
        }
        return lines
    }
}

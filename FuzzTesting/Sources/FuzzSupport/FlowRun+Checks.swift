import Foundation
import Fulfilment
import Gamebase
import InMemoryLedger
import Wire

extension FlowRun {
    // MARK: Input

    /// The provenance accessors never believe a purchase record, and never give values out of range.
    static func checkProvenance(_ input: PurchaseInput) {
        if !input.provenanceTrusted {
            fuzzCheck(input.previousAttempts == 0, "iap-attempts believed on a purchase record")
            fuzzCheck(input.originalSource == nil, "iap-original-* believed on a purchase record")
            fuzzCheck(
                input.originalTimestampMilliseconds == nil, "iap-original-timestamp believed on a purchase record")
            fuzzCheck(input.deadLetterReason == nil, "iap-reason believed on a purchase record")
        }
        fuzzCheck(
            (0...PurchaseInput.maxRecordedAttempts).contains(input.previousAttempts), "previousAttempts out of range")
        if let source = input.originalSource {
            fuzzCheck(
                !source.topic.isEmpty && source.partition >= 0 && source.offset >= 0, "an original source out of range")
        }
        _ = input.timestamp
    }

    /// A message that parsed is one the flow may act on: required fields present, within their limits, no control
    /// characters in identifiers.
    static func checkMessage(_ message: PurchaseMessage, maxBytes: Int) {
        typealias Limits = PurchaseMessage.Limits
        for (field, limit) in [
            (message.userId, Limits.userId), (message.paymentSeq, Limits.paymentSeq),
            (message.purchaseToken, Limits.purchaseToken),
        ] {
            fuzzCheck(!field.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "an empty required field parsed")
            fuzzCheck(field.utf8.count <= limit, "a required field over its limit parsed")
            fuzzCheck(
                !field.unicodeScalars.contains { $0.properties.generalCategory == .control },
                "control characters parsed")
        }
        fuzzCheck(
            (message.gamebaseProductId?.utf8.count ?? 0) <= Limits.gamebaseProductId, "gamebaseProductId over its limit"
        )
        fuzzCheck((message.storeCode?.utf8.count ?? 0) <= Limits.storeCode, "storeCode over its limit")
        fuzzCheck((message.payload?.utf8.count ?? 0) <= Limits.payload, "payload over its limit")
    }

    // MARK: Outcomes

    static func key(_ message: PurchaseMessage) -> RejectionKey {
        RejectionKey(paymentSeq: message.paymentSeq, userId: message.userId, tokenHash: message.tokenHash)
    }

    /// The grant of `paymentSeq` (its bytes) in the ledger.
    func storedGrant(_ paymentSeq: String) async -> GrantRecord? {
        await fuzzRead("the ledger's grant") { try await ledger.memory.grant(paymentSeq: paymentSeq) }
    }

    /// The rejection of the message `key` names (its bytes) in the ledger.
    func storedRejection(_ key: RejectionKey) async -> RejectionRecord? {
        await fuzzRead("the ledger's rejection") { try await ledger.memory.rejection(key) }
    }

    static func matches(_ grant: GrantRecord, _ message: PurchaseMessage) -> Bool {
        grant.userId.hasSameBytes(as: message.userId) && grant.purchaseToken.hasSameBytes(as: message.purchaseToken)
    }

    /// What an outcome claims is what the ledger holds.
    mutating func check(_ outcome: PurchaseOutcome, _ input: PurchaseInput, _ message: PurchaseMessage?) async {
        switch outcome {
        case .malformed:
            fuzzCheck(message == nil, "a message that parses judged malformed")
            return
        case .granted, .duplicate, .rejected, .gamebaseUnavailable, .stop:
            break
        }
        guard let message else { fuzzFailure("a message that does not parse judged \(outcome.metricLabel)") }
        switch outcome {
        case .granted(let paymentSeq, _):
            fuzzCheck(paymentSeq.hasSameBytes(as: message.paymentSeq), "granted another paymentSeq than the message's")
            guard let grant = await storedGrant(paymentSeq) else { fuzzFailure("granted without a grant row") }
            fuzzCheck(Self.matches(grant, message), "granted, but the grant row is not this message's")
            grantedOutcomes[Array(paymentSeq.utf8), default: 0] += 1
            fuzzCheck(grantedOutcomes[Array(paymentSeq.utf8)] == 1, "one paymentSeq granted twice")
        case .duplicate(let paymentSeq):
            fuzzCheck(paymentSeq.hasSameBytes(as: message.paymentSeq), "a duplicate of another paymentSeq")
            let grant = await storedGrant(paymentSeq)
            let rejection = await storedRejection(Self.key(message))
            // Only the owner's message (same userId and token, byte for byte) is a duplicate of a grant; any other
            // claim is rejected under its own id.
            fuzzCheck(
                grant.map { Self.matches($0, message) } == true || rejection != nil,
                "a conflicting claim judged a duplicate (it matches neither the grant nor a rejection of this message)")
        case .rejected(let paymentSeq, _):
            fuzzCheck(paymentSeq.hasSameBytes(as: message.paymentSeq), "rejected another paymentSeq than the message's")
            let rejection = await storedRejection(Self.key(message))
            fuzzCheck(rejection != nil, "rejected without a rejection row for this message")
            if let grant = await storedGrant(paymentSeq) {
                fuzzCheck(!Self.matches(grant, message), "the owner's own message rejected while its grant stands")
            }
            let id = "\(message.paymentSeq):consume-failed:\(message.claimHash)"
            fuzzCheck(
                publisher.records.contains {
                    $0.topic == PurchaseRecordFuzz.failedTopic && PublishedCloudEvent.read($0.value, "event").id == id
                },
                "rejected without its consume-failed event")
        case .malformed, .gamebaseUnavailable, .stop:
            break
        }
    }

    // MARK: Published records

    /// Checks the records published since `mark`. `deadLetter`: the reason and attempts a dead-letter record
    /// published now must carry.
    mutating func checkPublished(
        from mark: Int, _ input: PurchaseInput, _ message: PurchaseMessage?,
        deadLetter: (reason: ConsumeFailureReason, attempts: Int)
    ) async {
        for record in publisher.records[mark...] {
            switch record.topic {
            case PurchaseRecordFuzz.grantedTopic: await checkItemGranted(record)
            case PurchaseRecordFuzz.failedTopic: await checkConsumeFailed(record, input, message)
            case PurchaseRecordFuzz.deadLetterTopic:
                checkDeadLetter(record, input, reason: deadLetter.reason, attempts: deadLetter.attempts)
            default: fuzzFailure("a record published to \(record.topic)")
            }
        }
    }

    /// An item-granted event: valid JSON, the documented id of a grant in the ledger, keyed by its userId, its price
    /// the one Gamebase answered, the same event whenever it is sent again.
    mutating func checkItemGranted(_ record: OutboundRecord) async {
        let event = PublishedCloudEvent.read(record.value, "an item-granted event")
        fuzzCheck(event.type == EventFactory.itemGrantedType, "an item-granted event of type \(event.type ?? "-")")
        guard let paymentSeq = event.paymentSeq, let grant = await storedGrant(paymentSeq) else {
            fuzzFailure("an item-granted event without a grant")
        }
        fuzzCheck(
            event.id.map { $0.hasSameBytes(as: "\(grant.paymentSeq):item-granted") } == true,
            "an item-granted event id that is not <paymentSeq>:item-granted")
        fuzzCheck(
            event.userId.map { $0.hasSameBytes(as: grant.userId) } == true, "an item-granted event for another userId")
        fuzzCheck(record.key == Array(grant.userId.utf8), "an item-granted event not keyed by the userId")
        fuzzCheck(
            event.gamebaseProductId.map { $0.hasSameBytes(as: grant.gamebaseProductId) } == true, "another product")
        fuzzCheck(
            gamebase.answers.contains { Self.said($0, grant) && $0.payment.price == event.price },
            "an item-granted price that is not the one Gamebase answered")
        let id = Array(grant.paymentSeq.utf8)
        if let first = grantedPayloads[id] {
            fuzzCheck(first == record.value, "two different item-granted events under one id")
        } else {
            grantedPayloads[id] = record.value
        }
    }

    /// A consume-failed event: valid JSON, a documented reason, and one of the documented ids of this record.
    func checkConsumeFailed(_ record: OutboundRecord, _ input: PurchaseInput, _ message: PurchaseMessage?) async {
        let event = PublishedCloudEvent.read(record.value, "a consume-failed event")
        fuzzCheck(event.type == EventFactory.consumeFailedType, "a consume-failed event of type \(event.type ?? "-")")
        guard let reason = event.reason.flatMap(ConsumeFailureReason.init(rawValue:)) else {
            fuzzFailure("a consume-failed event with an undocumented reason")
        }
        fuzzCheck((event.attempts ?? -1) >= 0, "a consume-failed event without attempts")
        var ids = ["\(input.source.topic)/\(input.source.partition)/\(input.source.offset):consume-failed"]
        if let message {
            let claim = "\(message.paymentSeq):consume-failed:\(message.claimHash)"
            ids += [claim, "\(claim):\(reason.rawValue)", "\(message.paymentSeq):consume-failed:consume_rejected"]
        }
        fuzzCheck(
            ids.contains { event.id?.hasSameBytes(as: $0) == true }, "a consume-failed event id that is not documented")
        if reason == .consumeRejected {
            let grant = if let message { await storedGrant(message.paymentSeq) } else { GrantRecord?.none }
            fuzzCheck(grant != nil, "consume_rejected without a grant")
        }
    }

    /// A dead-letter record: the original key, value and headers, and the worker's provenance as the last header of
    /// every `iap-*` name the worker writes (a reader takes the last).
    func checkDeadLetter(_ record: OutboundRecord, _ input: PurchaseInput, reason: ConsumeFailureReason, attempts: Int)
    {
        func last(_ name: String) -> String? { record.headers.last { $0.name == name }?.stringValue }
        func trusted(_ name: String) -> String? {
            input.provenanceTrusted ? input.headers.last { $0.name == name }?.stringValue : nil
        }
        // The original place: what the trusted headers of a re-driven record say when all three are sound, else
        // where the record was read.
        var source = input.source
        if let topic = trusted("iap-original-topic"), !topic.isEmpty,
            let partition = trusted("iap-original-partition").flatMap({ Int32($0) }), partition >= 0,
            let offset = trusted("iap-original-offset").flatMap({ Int64($0) }), offset >= 0
        {
            source = MessageSource(topic: topic, partition: partition, offset: offset)
        }
        let timestamp = trusted("iap-original-timestamp").flatMap { Int64($0) } ?? input.timestampMilliseconds
        let previous = trusted("iap-attempts").flatMap { Int64($0) }.map { $0 > 0 ? Int(min($0, 1_000_000)) : 0 } ?? 0
        let (sum, overflow) = previous.addingReportingOverflow(max(0, attempts))
        let expected: [String: String] = [
            "iap-original-topic": source.topic, "iap-original-partition": String(source.partition),
            "iap-original-offset": String(source.offset), "iap-original-timestamp": timestamp.map { String($0) } ?? "",
            "iap-reason": reason.rawValue, "iap-attempts": String(overflow ? Int.max : sum),
            "iap-failed-at": RFC3339.string(settings.now), "iap-worker": PurchaseRecordFuzz.workerName,
        ]
        for (name, value) in expected {
            fuzzCheck(last(name) == value, "dead-letter header \(name) is \(last(name) ?? "missing"), not \(value)")
        }
        guard let error = last("iap-error") else { fuzzFailure("a dead-letter record without iap-error") }
        fuzzCheck(!error.contains { $0.isNewline }, "iap-error holds a line break")

        let omitted = last(DeadLetterFactory.omittedValueHeader)
        if record.value.isEmpty, omitted == String(input.value.count) {
            // Left out: the original size, as the worker's own last header; a producer's headers are not kept (they may
            // be what made it too large).
            fuzzCheck(
                record.key == input.key || (record.key == nil && (input.key?.count ?? 0) > 4_096), "the key changed")
            if !input.value.isEmpty {
                let own = Set(PurchaseRecordFuzz.provenanceNames + [DeadLetterFactory.omittedValueHeader])
                fuzzCheck(
                    record.headers.allSatisfy { own.contains($0.name) },
                    "a value-less dead-letter record keeps other headers")
                fuzzCheck(record.headers.count == own.count, "a value-less dead-letter record repeats a header")
            }
        } else {
            // Whole: nothing left out, whatever a producer's own header of that name says.
            fuzzCheck(
                omitted == nil || omitted == "0", "a dead-letter record says its value was left out, but carries it")
            fuzzCheck(record.value == input.value, "a dead-letter record whose value is not the original")
            fuzzCheck(record.key == input.key, "a dead-letter record whose key is not the original")
            // The original headers come first, as they were (a re-driven record's old provenance left out).
            let kept = input.provenanceTrusted ? input.headers.filter { !$0.name.hasPrefix("iap-") } : input.headers
            fuzzCheck(Array(record.headers.prefix(kept.count)) == kept, "the original headers changed")
        }
    }

    // MARK: Grants

    /// Whether a Gamebase answer says `grant`'s payment is grantable to its userId with its token.
    static func said(_ answer: ScriptedGamebase.Answer, _ grant: GrantRecord) -> Bool {
        answer.token == Array(grant.purchaseToken.utf8) && answer.payment.paymentSeq.hasSameBytes(as: grant.paymentSeq)
            && answer.payment.userId.hasSameBytes(as: grant.userId) && answer.payment.isConsumable == true
            && GamebaseProductType.isConsumable(answer.payment.productType)
            && answer.payment.gamebaseProductId.map { !$0.isEmpty && $0.hasSameBytes(as: grant.gamebaseProductId) }
                == true
    }

    /// No grant unless Gamebase said that paymentSeq belongs to that userId with that token, consumable.
    func checkGrants() async {
        let answers = gamebase.answers
        let inserts = ledger.grantInserts
        // Every grant row is one an insert put in: the rows the loop below checks are all the ledger holds.
        let stats = await fuzzRead("the ledger's stats") { try await ledger.memory.stats() }
        fuzzCheck(stats.granted + stats.consumed == inserts.count, "a grant row no grant insert put in")
        for (paymentSeq, count) in inserts {
            fuzzCheck(count == 1, "one paymentSeq granted twice")
            guard let grant = await storedGrant(paymentSeq) else {
                fuzzFailure("a grant insert that left no grant row")
            }
            guard let answer = answers.last(where: { Self.said($0, grant) }) else {
                fuzzFailure("a grant that Gamebase never confirmed for that paymentSeq, userId and token")
            }
            if settings.rejectTestPurchases {
                fuzzCheck(
                    answer.payment.isTestPurchase != true, "a test purchase granted while test purchases are rejected")
            }
        }
    }
}

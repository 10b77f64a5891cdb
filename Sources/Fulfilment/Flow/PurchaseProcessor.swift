import Foundation
import Gamebase
import Logging
import Wire

/// The consume flow for one purchase message (DESIGN §1), idempotent at every step: whatever crashed before,
/// running a message again resumes from the ledger's state.
///
/// It throws only when the ledger or the event publisher fails; nothing is then lost, because the message is
/// not finished and its offset is not stored.
public struct PurchaseProcessor: Sendable {
    public let gamebase: any GamebaseAPI
    /// The purchases role, batched across the purchases in flight and bounded by the ledger's deadline.
    public let ledger: FlowLedger
    public let publisher: any EventPublisher
    public let configuration: FulfilmentConfiguration
    public let logger: Logger
    public let clock: any WorkerClock

    /// - Parameters:
    ///   - ledger: the ledger's purchases role; the flow's calls to it are batched (``FlowLedger``).
    ///   - ledgerDeadline: the deadline of every ledger call of the flow.
    public init(
        gamebase: any GamebaseAPI, ledger: any PurchaseLedger, ledgerDeadline: LedgerDeadline = LedgerDeadline(),
        publisher: any EventPublisher, configuration: FulfilmentConfiguration, logger: Logger,
        clock: any WorkerClock = .system
    ) {
        self.gamebase = gamebase
        self.ledger = FlowLedger(ledger, deadline: ledgerDeadline)
        self.publisher = publisher
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
    }

    func now() -> Date { clock.now }

    /// Parses a record's value with this flow's size limit.
    public func parse(_ input: PurchaseInput) -> Result<PurchaseMessage, MalformedMessage> {
        PurchaseMessage.parse(input.value, maxBytes: configuration.maxMessageBytes)
    }

    /// Waits, before each Gamebase call, until the caller lets the purchase call Gamebase (the worker holds purchases
    /// while Gamebase is down or refuses its configuration). It throws `CancellationError` when the purchase should
    /// be abandoned instead (its partition moved, the worker is stopping).
    public typealias GamebaseGate = @Sendable () async throws -> Void

    /// Runs the flow for one record.
    /// - Parameters:
    ///   - parsed: the result of ``parse(_:)`` when the caller parsed it already.
    ///   - gate: awaited before every Gamebase call.
    /// - Throws: `CancellationError` when the task was cancelled (nothing was decided: the record is redelivered),
    ///   or what the ledger or the publisher threw.
    public func process(
        _ input: PurchaseInput, parsed: Result<PurchaseMessage, MalformedMessage>? = nil, gate: GamebaseGate? = nil
    ) async throws -> PurchaseOutcome {
        let message: PurchaseMessage
        switch parsed ?? parse(input) {
        case .failure(let malformed):
            try await publishMalformed(input, malformed)
            return .malformed(problem: malformed.problem)
        case .success(let parsed):
            message = parsed
        }

        let key = RejectionKey(paymentSeq: message.paymentSeq, userId: message.userId, tokenHash: message.tokenHash)
        let known = try await ledger.lookup(key)
        if let grant = known.grant, known.rejection == nil || claimMatches(grant, message) {
            return try await settle(message, input, against: grant, attempts: 0, gate: gate)
        }
        if known.rejection != nil {
            await noteDuplicate(DuplicateNote(paymentSeq: message.paymentSeq, rejection: key))
            return .duplicate(paymentSeq: message.paymentSeq)
        }
        return try await verifyAndGrant(message, input, gate: gate)
    }

    /// A message the ledger knows nothing of: verified with Gamebase, then granted (and consumed) or rejected.
    ///
    /// Each stage of the flow is a function of its own, kept out of line: an async function's frame holds every
    /// value any of its suspension points keeps alive, inlined callees' included, and a frame lives as long as its
    /// purchase is in flight — inlined into one, the flow's stages made a 27 KB frame, the largest of the frames
    /// that held 22 MiB with 512 purchases in flight (heaptrack, issue #39; docs/benchmarks.md). So the checks on
    /// Gamebase's answer decide without waiting (``examine(_:_:_:)``), and each outcome is one call.
    @inline(never)
    func verifyAndGrant(
        _ message: PurchaseMessage, _ input: PurchaseInput, gate: GamebaseGate?
    ) async throws -> PurchaseOutcome {
        let transactionID = GamebaseTransactionID()
        var attempts = 0
        let transaction: PaymentTransaction
        do {
            transaction = try await configuration.verifyRetry.run { attempt in
                attempts = attempt
                try await gate?()
                return try await gamebase.paymentTransaction(
                    accessToken: message.purchaseToken, transactionID: transactionID)
            }
        } catch let error as GamebaseError {
            return try await refused(message, input, error, attempts: attempts, gate: gate)
        }
        switch examine(transaction, message, input) {
        case .grant(let grant, let verdict):
            return try await grantVerified(grant, message, input, attempts: attempts, verdict: verdict, gate: gate)
        case .reject(let reason, let detail, let verdict):
            return try await reject(message, input, reason, detail: detail, attempts: attempts, verdict: verdict)
        case .consumedElsewhere(let verdict):
            // Another worker may have granted and consumed it meanwhile (grant always precedes Consume).
            if let grant = try await ledger.grant(paymentSeq: message.paymentSeq) {
                return try await settle(message, input, against: grant, attempts: attempts, gate: gate)
            }
            return try await reject(
                message, input, .consumedWithoutGrant, detail: "consumed at Gamebase with no grant in this ledger",
                attempts: attempts, verdict: verdict)
        }
    }

    /// What Gamebase's answer allows for a message, decided without waiting.
    enum Finding {
        /// A consumable payment of the message's own: this grant.
        case grant(GrantRecord, PaymentVerdict)
        case reject(ConsumeFailureReason, detail: String, verdict: PaymentVerdict?)
        /// Consumed at Gamebase already: the ledger decides whether it is a grant of ours or a rejection.
        case consumedElsewhere(PaymentVerdict)
    }

    /// The checks on a verified payment, each with its own reason, in order. Identifiers are compared byte for byte.
    func examine(_ transaction: PaymentTransaction, _ message: PurchaseMessage, _ input: PurchaseInput) -> Finding {
        // The price as text, once, for the verdict and the grant (DecimalText remembers the catalogue's prices).
        let price = transaction.price.map(DecimalText.description)
        let verdict = PaymentVerdict(
            paymentId: transaction.paymentId, gamebaseProductId: transaction.gamebaseProductId,
            marketId: transaction.marketId, price: price, currency: transaction.currency)
        if !transaction.paymentSeq.hasSameBytes(as: message.paymentSeq) {
            // The answer is another payment's: filed under this paymentSeq it would make `find <its order id>` show
            // this claim as that payment.
            return .reject(.paymentMismatch, detail: "the token belongs to another payment", verdict: nil)
        }
        if !transaction.userId.hasSameBytes(as: message.userId) {
            return .reject(.userMismatch, detail: "the payment belongs to another user", verdict: verdict)
        }
        if !GamebaseProductType.isConsumable(transaction.productType) {
            return .reject(
                .notConsumable, detail: "product type \(transaction.productType ?? "missing") is not consumable",
                verdict: verdict)
        }
        if transaction.isConsumable != true {
            return .consumedElsewhere(verdict)
        }
        if configuration.rejectTestPurchases, transaction.isTestPurchase == true {
            return .reject(.testPurchase, detail: "test purchases are rejected", verdict: verdict)
        }
        guard let productID = transaction.gamebaseProductId, !productID.isEmpty else {
            return .reject(.invalidPurchase, detail: "Gamebase gave no gamebaseProductId", verdict: verdict)
        }
        let grant = GrantRecord(
            paymentSeq: message.paymentSeq, userId: transaction.userId, gamebaseProductId: productID,
            purchaseToken: message.purchaseToken, productSeq: transaction.productSeq, marketId: transaction.marketId,
            productType: transaction.productType, price: price, currency: transaction.currency,
            paymentId: transaction.paymentId, isTestPurchase: transaction.isTestPurchase ?? false,
            purchaseTime: transaction.purchaseTime, payload: transaction.payload, grantedAt: now(),
            source: input.recordedSource, origin: input.origin,
            messageTimestampMilliseconds: input.origin == .message ? input.timestampMilliseconds : nil)
        return .grant(grant, verdict)
    }

    /// Gamebase refused to verify the purchase token (or could not be reached).
    @inline(never)  // Out of line: see verifyAndGrant.
    func refused(
        _ message: PurchaseMessage, _ input: PurchaseInput, _ error: GamebaseError, attempts: Int, gate: GamebaseGate?
    ) async throws -> PurchaseOutcome {
        // A call cut short by cancellation says nothing about the purchase or about Gamebase.
        try Task.checkCancellation()
        switch error.kind {
        case .configuration:
            return .stop(error, durable: false)
        case .transient:
            return .gamebaseUnavailable(error, attempts: attempts)
        case .permanent, .alreadyConsumed:
            // Another instance may have granted (and consumed) the payment meanwhile: the ledger decides first.
            if let grant = try await ledger.grant(paymentSeq: message.paymentSeq) {
                return try await settle(message, input, against: grant, attempts: attempts, gate: gate)
            }
            // A payment Gamebase itself listed as completed and unconsumed is real: an error code here (a store
            // still verifying, a 5000) is no verdict on it. Rejecting would record its claim for good — every
            // later pass and the player's own late message would be answered by that rejection, and a paid
            // purchase never granted. Nothing is decided; the next pass asks again.
            if input.origin == .reconciliation {
                return .gamebaseUnavailable(error, attempts: attempts)
            }
            return try await reject(
                message, input, .invalidPurchase, detail: "Gamebase refused the purchase token", error: error,
                attempts: attempts)
        }
    }

    /// Grants a verified payment: the row and its event in one transaction (the unique paymentSeq settles races),
    /// then the event, then Consume.
    @inline(never)  // Out of line: see verifyAndGrant.
    func grantVerified(
        _ grant: GrantRecord, _ message: PurchaseMessage, _ input: PurchaseInput, attempts: Int,
        verdict: PaymentVerdict, gate: GamebaseGate?
    ) async throws -> PurchaseOutcome {
        let event = configuration.events.itemGranted(grant)
        switch try await ledger.insertGrant(grant, event: event) {
        case .alreadyGranted(let existing):
            return try await settle(message, input, against: existing, attempts: attempts, gate: gate)
        case .refunded(let notificationId):
            // The store gave the money back before the item was granted: never grant it (and never Consume it).
            return try await reject(
                message, input, .refunded,
                detail: "the store refunded the payment before it was granted (notification \(notificationId))",
                attempts: attempts, verdict: verdict)
        case .inserted:
            logGranted(grant)
            // The event is marked published together with the Consume outcome: one ledger write fewer per
            // purchase. Should the worker die in between, the sweeper re-sends it under the same id.
            try await publisher.publish(OutboundRecord(event))
            switch try await consume(grant, publishedEventID: event.id, gate: gate) {
            case .done: return .granted(paymentSeq: grant.paymentSeq, consumePending: false)
            // Set aside (a refund revoked it before its Consume): not consumed, and not to be reported so.
            case .pending, .setAside: return .granted(paymentSeq: grant.paymentSeq, consumePending: true)
            case .stop(let error): return .stop(error, durable: true)
            }
        }
    }

    /// Out of line: a log call inlined here would take room in the frame of every purchase in flight (issue #39).
    @inline(never)
    func logGranted(_ grant: GrantRecord) {
        logger.debug(
            "granted", metadata: ["iap.payment_seq": "\(grant.paymentSeq)", "iap.user_id": "\(grant.userId)"])
    }

    /// Whether `message` claims what `grant` granted: the same userId and the same purchase token, byte for byte.
    func claimMatches(_ grant: GrantRecord, _ message: PurchaseMessage) -> Bool {
        grant.userId.hasSameBytes(as: message.userId) && grant.purchaseToken.hasSameBytes(as: message.purchaseToken)
    }

    /// A message for a paymentSeq that is granted: the owner's message (a duplicate, which finishes the grant if a
    /// crash left it unfinished), or a conflicting claim — someone else's userId, or another token — which is
    /// rejected under its own id without asking Gamebase: the grant already says whose payment it is.
    @inline(never)  // Out of line: see verifyAndGrant.
    func settle(
        _ message: PurchaseMessage, _ input: PurchaseInput, against grant: GrantRecord, attempts: Int,
        gate: GamebaseGate?
    ) async throws -> PurchaseOutcome {
        if !grant.userId.hasSameBytes(as: message.userId) {
            return try await reject(
                message, input, .userMismatch, detail: "the payment was granted to another user", attempts: attempts)
        }
        if !grant.purchaseToken.hasSameBytes(as: message.purchaseToken) {
            return try await reject(
                message, input, .invalidPurchase, detail: "the purchase token is not the granted payment's",
                attempts: attempts)
        }
        return try await resume(grant, gate: gate)
    }

    /// Finishes an existing grant: (re)publishes its event if a crash left it unpublished, and consumes it.
    @inline(never)  // Out of line: see verifyAndGrant.
    func resume(_ grant: GrantRecord, gate: GamebaseGate? = nil) async throws -> PurchaseOutcome {
        if grant.state == .consumed {
            await noteDuplicate(DuplicateNote(paymentSeq: grant.paymentSeq))
            return .duplicate(paymentSeq: grant.paymentSeq)
        }
        try await publishGrantEventIfNeeded(grant)
        if case .stop(let error) = try await consume(grant, gate: gate) { return .stop(error, durable: true) }
        await noteDuplicate(DuplicateNote(paymentSeq: grant.paymentSeq))
        return .duplicate(paymentSeq: grant.paymentSeq)
    }

    /// Counts a duplicate with what it repeats. A count for people to read: a ledger that refuses it costs the count,
    /// never the purchase (whose outcome is already durable).
    @inline(never)  // Out of line: see verifyAndGrant.
    func noteDuplicate(_ note: DuplicateNote) async {
        do {
            try await ledger.recordDuplicate(note)
        } catch {
            logger.warning(
                "duplicate not counted in the ledger",
                metadata: ["iap.payment_seq": "\(note.paymentSeq)", "iap.error": "\(error)"])
        }
    }

    /// Publishes the grant's item-granted event if a crash left it unpublished.
    @inline(never)  // Out of line: see verifyAndGrant.
    public func publishGrantEventIfNeeded(_ grant: GrantRecord) async throws {
        guard grant.eventPublishedAt == nil else { return }
        if let event = try await ledger.event(id: EventFactory.itemGrantedID(paymentSeq: grant.paymentSeq)),
            event.publishedAt == nil
        {
            try await publish(event)
        }
    }

    public enum ConsumeResult: Sendable, Equatable {
        case done
        /// Consume did not succeed now; the grant stays `granted` for the sweeper.
        case pending
        /// Gamebase refused Consume for good of a grant a refund revoked: set aside, the sweeper no longer retries it.
        case setAside
        case stop(GamebaseError)
    }

    /// Calls Consume (with retries) for a granted row and marks it consumed. Never undoes the grant.
    ///
    /// - Parameters:
    ///   - publishedEventID: an event published but not yet marked so; it is marked in the same write as the
    ///     Consume outcome (or before the first retry, so a long retry does not look unpublished).
    ///   - gate: awaited before every Consume call.
    /// - Throws: `CancellationError` when cancelled (the grant stays `granted`; a redelivery or the sweeper finishes
    ///   it), or what the ledger or the publisher threw.
    @inline(never)  // Out of line: see verifyAndGrant.
    public func consume(_ grant: GrantRecord, publishedEventID: String? = nil, gate: GamebaseGate? = nil) async throws
        -> ConsumeResult
    {
        let transactionID = GamebaseTransactionID()
        var attempts = 0
        var unmarked = publishedEventID
        do {
            let outcome = try await configuration.consumeRetry.run { attempt in
                attempts = attempt
                if attempt > 1, let id = unmarked {
                    try await ledger.markPublished(eventID: id, at: now())
                    unmarked = nil
                }
                try await gate?()
                return try await gamebase.consume(
                    paymentSeq: grant.paymentSeq, accessToken: grant.purchaseToken, transactionID: transactionID)
            }
            let code = outcome == .alreadyConsumed ? GamebaseResultCode.alreadyConsumed.rawValue : 0
            try await ledger.markConsumed(
                paymentSeq: grant.paymentSeq, resultCode: code, at: now(), publishedEventID: unmarked)
            return .done
        } catch let error as GamebaseError {
            if Task.isCancelled {
                if let id = unmarked { try? await ledger.markPublished(eventID: id, at: now()) }
                throw CancellationError()
            }
            return try await consumeFailed(grant, error, attempts: attempts, publishedEventID: unmarked)
        }
    }

    /// Consume failed after its retries: records the failure with the grant, and tells downstream when Gamebase
    /// refuses it for good. Out of line (see verifyAndGrant): what it holds is never in the frame of a Consume that
    /// succeeds.
    @inline(never)
    func consumeFailed(_ grant: GrantRecord, _ error: GamebaseError, attempts: Int, publishedEventID: String?)
        async throws -> ConsumeResult
    {
        try await ledger.recordConsumeFailure(
            paymentSeq: grant.paymentSeq, resultCode: error.resultCode?.rawValue, at: now(),
            publishedEventID: publishedEventID)
        logger.warning(
            "consume failed after grant",
            metadata: [
                "iap.payment_seq": "\(grant.paymentSeq)",
                "gamebase.result_code": "\(error.resultCode?.description ?? "-")",
                "gamebase.error": "\(error.message)",
            ])
        switch error.kind {
        case .configuration:
            return .stop(error)
        case .permanent:
            // Gamebase refuses to consume a payment we granted: tell downstream, keep the grant.
            let id = "\(grant.paymentSeq):consume-failed:consume_rejected"
            let event = configuration.events.consumeFailed(
                id: id, userId: grant.userId, paymentSeq: grant.paymentSeq, reason: .consumeRejected,
                resultCode: error.resultCode?.rawValue, resultMessage: error.resultMessage, attempts: attempts,
                detail: "the item was granted; Gamebase refused Consume", key: nil, at: now())
            try await publisher.publish(OutboundRecord(event))
            // Revoked by a refund, a payment Gamebase will not consume never will be: retrying it for ever would
            // only keep the unconsumed-grant alert firing. A reversal of the refund takes it back.
            if try await ledger.setAsideRevokedGrant(paymentSeq: grant.paymentSeq, at: now()) {
                logger.warning(
                    "Gamebase refuses to consume a grant a refund revoked; set aside, not retried",
                    metadata: [
                        "iap.payment_seq": "\(grant.paymentSeq)",
                        "gamebase.result_code": "\(error.resultCode?.description ?? "-")",
                    ])
                return .setAside
            }
            return .pending
        case .transient, .alreadyConsumed:
            return .pending
        }
    }

    /// Records the rejection of this message with its consume-failed event, then publishes the event.
    @inline(never)  // Out of line: see verifyAndGrant.
    func reject(
        _ message: PurchaseMessage, _ input: PurchaseInput, _ reason: ConsumeFailureReason, detail: String,
        error: GamebaseError? = nil, attempts: Int, verdict: PaymentVerdict? = nil
    ) async throws -> PurchaseOutcome {
        let date = now()
        // No message asked for this one: say so to whoever reads the event.
        let detail = input.origin == .reconciliation ? "\(detail) (found by reconciliation)" : detail
        let eventID = EventFactory.rejectionID(message)
        let event = configuration.events.consumeFailed(
            id: eventID, userId: message.userId, paymentSeq: message.paymentSeq, reason: reason,
            resultCode: error?.resultCode?.rawValue, resultMessage: error?.resultMessage, attempts: attempts,
            detail: detail,
            key: Self.eventKey(input.key), at: date)
        let rejection = RejectionRecord(
            key: RejectionKey(paymentSeq: message.paymentSeq, userId: message.userId, tokenHash: message.tokenHash),
            reason: reason.rawValue, resultCode: error?.resultCode?.rawValue, resultMessage: error?.resultMessage,
            detail: detail, eventID: eventID, rejectedAt: date, source: input.recordedSource,
            messageTimestampMilliseconds: input.origin == .message ? input.timestampMilliseconds : nil, verdict: verdict
        )
        if try await ledger.insertRejection(rejection, event: event) {
            try await publish(event)
        } else if let stored = try await ledger.event(id: eventID), stored.publishedAt == nil {
            try await publish(stored)
        }
        return .rejected(paymentSeq: message.paymentSeq, reason: reason)
    }

    /// Publishes an outbox event and marks it published.
    @inline(never)  // Out of line: see verifyAndGrant.
    public func publish(_ event: OutboxEvent) async throws {
        try await publisher.publish(OutboundRecord(event))
        try await ledger.markPublished(eventID: event.id, at: now())
    }

    @inline(never)  // Out of line: see verifyAndGrant.
    func publishMalformed(_ input: PurchaseInput, _ malformed: MalformedMessage) async throws {
        let date = now()
        let id = "\(input.source.topic)/\(input.source.partition)/\(input.source.offset):consume-failed"
        let event = configuration.events.consumeFailed(
            id: id, userId: malformed.userId, paymentSeq: malformed.paymentSeq, reason: .malformedMessage, attempts: 0,
            detail: malformed.problem, key: Self.eventKey(input.key), at: date)
        try await publisher.publish(OutboundRecord(event))
        try await publishDeadLetter(
            configuration.deadLetters.record(
                for: input, reason: .malformedMessage, error: malformed.problem, attempts: 1, at: date),
            for: input)
    }

    /// A consume-failed event's key when there is no userId: the original key, unless it is too large to be a
    /// sensible partitioning key (a hostile producer's 1 MB key would make the event itself unsendable).
    static func eventKey(_ key: [UInt8]?) -> [UInt8]? {
        guard let key, key.count <= 1_024 else { return nil }
        return key
    }

    /// Publishes a dead-letter record whole; when it is larger than the dead-letter topic (or the producer) accepts,
    /// it publishes it without its value instead, so one record can never stall its partition.
    ///
    /// Then it records the dead letter in the ledger for `iap-worker find`. The dead-letter topic stays the record of
    /// truth (what `reprocess` reads): a ledger that refuses the row costs the lookup, never the record.
    @inline(never)  // Out of line: see verifyAndGrant.
    public func publishDeadLetter(_ record: OutboundRecord, for input: PurchaseInput) async throws {
        var location: RecordLocation?
        var omitted = false
        do {
            location = try await publisher.publishLocated(record)
        } catch  where publisher.isRecordTooLarge(error) {
            logger.error(
                "dead-letter record too large for the dead-letter topic; published without its value",
                metadata: ["iap.value_bytes": "\(record.value.count)", "kafka.topic": "\(record.topic)"])
            location = try await publisher.publishLocated(configuration.deadLetters.withoutValue(record))
            omitted = true
        }
        let entry = configuration.deadLetters.entry(
            for: record, input: input, maxMessageBytes: configuration.maxMessageBytes, location: location,
            valueOmitted: omitted)
        do {
            try await ledger.recordDeadLetter(entry)
        } catch {
            logger.warning(
                "dead letter published but not recorded in the ledger",
                metadata: ["iap.reason": "\(entry.reason)", "kafka.topic": "\(record.topic)", "iap.error": "\(error)"])
        }
    }

    /// Dead-letters a message the flow could not finish (Gamebase unavailable, or a worker failure), with a
    /// retryable consume-failed event when the purchase could be read.
    @inline(never)  // Out of line: see verifyAndGrant.
    public func deadLetter(_ input: PurchaseInput, reason: ConsumeFailureReason, error: String, attempts: Int)
        async throws
    {
        let date = now()
        if case .success(let message) = PurchaseMessage.parse(input.value, maxBytes: configuration.maxMessageBytes) {
            let (total, overflow) = input.previousAttempts.addingReportingOverflow(max(0, attempts))
            let event = configuration.events.consumeFailed(
                id: "\(EventFactory.rejectionID(message)):\(reason.rawValue)", userId: message.userId,
                paymentSeq: message.paymentSeq, reason: reason, attempts: overflow ? Int.max : total, detail: error,
                key: Self.eventKey(input.key), at: date)
            try await publisher.publish(OutboundRecord(event))
        }
        try await publishDeadLetter(
            configuration.deadLetters.record(for: input, reason: reason, error: error, attempts: attempts, at: date),
            for: input)
    }
}

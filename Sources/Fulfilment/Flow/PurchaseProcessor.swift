import Foundation
import Gamebase
import Ledger
import Logging

/// The consume flow for one purchase message (DESIGN §1), idempotent at every step: whatever crashed before,
/// running a message again resumes from the ledger's state.
///
/// It throws only when the ledger or the event publisher fails; nothing is then lost, because the message is
/// not finished and its offset is not stored.
public struct PurchaseProcessor: Sendable {
    public let gamebase: any GamebaseAPI
    public let ledger: any LedgerStore
    public let publisher: any EventPublisher
    public let configuration: FulfilmentConfiguration
    public let logger: Logger
    let now: @Sendable () -> Date

    public init(
        gamebase: any GamebaseAPI, ledger: any LedgerStore, publisher: any EventPublisher,
        configuration: FulfilmentConfiguration, logger: Logger, now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.gamebase = gamebase
        self.ledger = ledger
        self.publisher = publisher
        self.configuration = configuration
        self.logger = logger
        self.now = now
    }

    /// Parses a record's value with this flow's size limit.
    public func parse(_ input: PurchaseInput) -> Result<PurchaseMessage, MalformedMessage> {
        PurchaseMessage.parse(input.value, maxBytes: configuration.maxMessageBytes)
    }

    /// Runs the flow for one record.
    /// - Parameter parsed: the result of ``parse(_:)`` when the caller parsed it already.
    public func process(_ input: PurchaseInput, parsed: Result<PurchaseMessage, MalformedMessage>? = nil) async throws
        -> PurchaseOutcome
    {
        let message: PurchaseMessage
        switch parsed ?? parse(input) {
        case .failure(let malformed):
            try await publishMalformed(input, malformed)
            return .malformed(problem: malformed.problem)
        case .success(let parsed):
            message = parsed
        }

        let key = RejectionKey(paymentSeq: message.paymentSeq, userId: message.userId, tokenHash: message.tokenHash)
        let known = try await ledger.lookup(paymentSeq: message.paymentSeq, rejection: key)
        if let grant = known.grant { return try await resume(grant) }
        if known.rejection != nil { return .duplicate(paymentSeq: message.paymentSeq) }

        // Verify with Gamebase.
        let transactionID = GamebaseTransactionID()
        var attempts = 0
        let transaction: PaymentTransaction
        do {
            transaction = try await configuration.verifyRetry.run { attempt in
                attempts = attempt
                return try await gamebase.paymentTransaction(accessToken: message.purchaseToken, transactionID: transactionID)
            }
        } catch let error as GamebaseError {
            switch error.kind {
            case .configuration:
                return .stop(error, durable: false)
            case .transient:
                return .gamebaseUnavailable(error, attempts: attempts)
            case .permanent, .alreadyConsumed:
                return try await reject(
                    message, input, .invalidPurchase, detail: "Gamebase refused the purchase token", error: error,
                    attempts: attempts)
            }
        }

        // Checks on the verified payment, each with its own reason.
        if transaction.paymentSeq != message.paymentSeq {
            return try await reject(
                message, input, .paymentMismatch, detail: "the token belongs to another payment", attempts: attempts)
        }
        if transaction.userId != message.userId {
            return try await reject(
                message, input, .userMismatch, detail: "the payment belongs to another user", attempts: attempts)
        }
        if !GamebaseProductType.isConsumable(transaction.productType) {
            return try await reject(
                message, input, .notConsumable, detail: "product type \(transaction.productType ?? "missing") is not consumable",
                attempts: attempts)
        }
        if transaction.isConsumable == false {
            // Another worker may have granted and consumed it meanwhile (grant always precedes Consume).
            if let grant = try await ledger.grant(paymentSeq: message.paymentSeq) { return try await resume(grant) }
            return try await reject(
                message, input, .consumedWithoutGrant, detail: "consumed at Gamebase with no grant in this ledger",
                attempts: attempts)
        }
        if configuration.rejectTestPurchases, transaction.isTestPurchase == true {
            return try await reject(message, input, .testPurchase, detail: "test purchases are rejected", attempts: attempts)
        }
        guard let productID = transaction.gamebaseProductId, !productID.isEmpty else {
            return try await reject(
                message, input, .invalidPurchase, detail: "Gamebase gave no gamebaseProductId", attempts: attempts)
        }

        // Grant: the row and its event in one transaction; the unique paymentSeq settles races.
        let grant = GrantRecord(
            paymentSeq: message.paymentSeq, userId: transaction.userId, gamebaseProductId: productID,
            purchaseToken: message.purchaseToken, productSeq: transaction.productSeq, marketId: transaction.marketId,
            productType: transaction.productType, price: transaction.price.map { "\($0)" }, currency: transaction.currency,
            paymentId: transaction.paymentId, isTestPurchase: transaction.isTestPurchase ?? false,
            purchaseTime: transaction.purchaseTime, payload: transaction.payload, grantedAt: now(), source: input.source)
        let event = configuration.events.itemGranted(grant)
        switch try await ledger.insertGrant(grant, event: event) {
        case .alreadyGranted(let existing):
            return try await resume(existing)
        case .inserted:
            logger.debug("granted", metadata: ["iap.payment_seq": "\(grant.paymentSeq)", "iap.user_id": "\(grant.userId)"])
            // The event is marked published together with the Consume outcome: one ledger write fewer per
            // purchase. Should the worker die in between, the sweeper re-sends it under the same id.
            try await publisher.publish(OutboundRecord(event))
            switch try await consume(grant, publishedEventID: event.id) {
            case .done: return .granted(paymentSeq: grant.paymentSeq, consumePending: false)
            case .pending: return .granted(paymentSeq: grant.paymentSeq, consumePending: true)
            case .stop(let error): return .stop(error, durable: true)
            }
        }
    }

    /// Finishes an existing grant: (re)publishes its event if a crash left it unpublished, and consumes it.
    func resume(_ grant: GrantRecord) async throws -> PurchaseOutcome {
        if grant.state == .consumed { return .duplicate(paymentSeq: grant.paymentSeq) }
        try await publishGrantEventIfNeeded(grant)
        if case .stop(let error) = try await consume(grant) { return .stop(error, durable: true) }
        return .duplicate(paymentSeq: grant.paymentSeq)
    }

    /// Publishes the grant's item-granted event if a crash left it unpublished.
    public func publishGrantEventIfNeeded(_ grant: GrantRecord) async throws {
        guard grant.eventPublishedAt == nil else { return }
        if let event = try await ledger.event(id: EventFactory.itemGrantedID(paymentSeq: grant.paymentSeq)), event.publishedAt == nil {
            try await publish(event)
        }
    }

    public enum ConsumeResult: Sendable, Equatable {
        case done
        /// Consume did not succeed now; the grant stays `granted` for the sweeper.
        case pending
        case stop(GamebaseError)
    }

    /// Calls Consume (with retries) for a granted row and marks it consumed. Never undoes the grant.
    ///
    /// - Parameter publishedEventID: an event published but not yet marked so; it is marked in the same write
    ///   as the Consume outcome (or before the first retry, so a long retry does not look unpublished).
    public func consume(_ grant: GrantRecord, publishedEventID: String? = nil) async throws -> ConsumeResult {
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
                return try await gamebase.consume(
                    paymentSeq: grant.paymentSeq, accessToken: grant.purchaseToken, transactionID: transactionID)
            }
            let code = outcome == .alreadyConsumed ? GamebaseResultCode.alreadyConsumed.rawValue : 0
            try await ledger.markConsumed(paymentSeq: grant.paymentSeq, resultCode: code, at: now(), publishedEventID: unmarked)
            return .done
        } catch let error as GamebaseError {
            try await ledger.recordConsumeFailure(
                paymentSeq: grant.paymentSeq, resultCode: error.resultCode?.rawValue, at: now(), publishedEventID: unmarked)
            logger.warning(
                "consume failed after grant",
                metadata: [
                    "iap.payment_seq": "\(grant.paymentSeq)", "gamebase.result_code": "\(error.resultCode?.description ?? "-")",
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
                return .pending
            case .transient, .alreadyConsumed:
                return .pending
            }
        }
    }

    /// Records the rejection of this message with its consume-failed event, then publishes the event.
    func reject(
        _ message: PurchaseMessage, _ input: PurchaseInput, _ reason: ConsumeFailureReason, detail: String,
        error: GamebaseError? = nil, attempts: Int
    ) async throws -> PurchaseOutcome {
        let date = now()
        let eventID = EventFactory.rejectionID(message)
        let event = configuration.events.consumeFailed(
            id: eventID, userId: message.userId, paymentSeq: message.paymentSeq, reason: reason,
            resultCode: error?.resultCode?.rawValue, resultMessage: error?.resultMessage, attempts: attempts, detail: detail,
            key: input.key, at: date)
        let rejection = RejectionRecord(
            key: RejectionKey(paymentSeq: message.paymentSeq, userId: message.userId, tokenHash: message.tokenHash),
            reason: reason.rawValue, resultCode: error?.resultCode?.rawValue, resultMessage: error?.resultMessage,
            detail: detail, eventID: eventID, rejectedAt: date, source: input.source)
        if try await ledger.insertRejection(rejection, event: event) {
            try await publish(event)
        } else if let stored = try await ledger.event(id: eventID), stored.publishedAt == nil {
            try await publish(stored)
        }
        return .rejected(paymentSeq: message.paymentSeq, reason: reason)
    }

    /// Publishes an outbox event and marks it published.
    public func publish(_ event: OutboxEvent) async throws {
        try await publisher.publish(OutboundRecord(event))
        try await ledger.markPublished(eventID: event.id, at: now())
    }

    func publishMalformed(_ input: PurchaseInput, _ malformed: MalformedMessage) async throws {
        let date = now()
        let id = "\(input.source.topic)/\(input.source.partition)/\(input.source.offset):consume-failed"
        let event = configuration.events.consumeFailed(
            id: id, userId: malformed.userId, paymentSeq: malformed.paymentSeq, reason: .malformedMessage, attempts: 0,
            detail: malformed.problem, key: input.key, at: date)
        try await publisher.publish(OutboundRecord(event))
        try await publisher.publish(
            configuration.deadLetters.record(for: input, reason: .malformedMessage, error: malformed.problem, attempts: 1, at: date))
    }

    /// Dead-letters a message the flow could not finish (Gamebase unavailable, or a worker failure), with a
    /// retryable consume-failed event when the purchase could be read.
    public func deadLetter(_ input: PurchaseInput, reason: ConsumeFailureReason, error: String, attempts: Int) async throws {
        let date = now()
        if case .success(let message) = PurchaseMessage.parse(input.value, maxBytes: configuration.maxMessageBytes) {
            let event = configuration.events.consumeFailed(
                id: "\(EventFactory.rejectionID(message)):\(reason.rawValue)", userId: message.userId,
                paymentSeq: message.paymentSeq, reason: reason, attempts: input.previousAttempts + attempts, detail: error,
                key: input.key, at: date)
            try await publisher.publish(OutboundRecord(event))
        }
        try await publisher.publish(
            configuration.deadLetters.record(for: input, reason: reason, error: error, attempts: attempts, at: date))
    }
}

import Foundation
import Wire

/// Where a published record landed: its topic, and its partition and offset once the broker acknowledged it.
public struct RecordLocation: Sendable, Hashable, Codable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64

    public init(topic: String, partition: Int32, offset: Int64) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
    }
}

/// What Gamebase's Get Payment Transaction said of a payment a rejection judged: kept with the rejection so a support
/// agent sees what the verdict was based on (never the token).
public struct PaymentVerdict: Sendable, Hashable {
    /// The fields, in one box its copies share (``CopyOnWrite``): a verdict rides from Gamebase's answer through the
    /// grant or the rejection, across their suspension points; inline it was 80 bytes of each such slot in the frames
    /// of every purchase in flight (issue #39).
    private var fields: CopyOnWrite<Fields>

    struct Fields: Sendable, Hashable {
        var paymentId: String?
        var gamebaseProductId: String?
        var marketId: String?
        var price: String?
        var currency: String?
    }

    public var paymentId: String? {
        get { fields.value.paymentId }
        set { fields.value.paymentId = newValue }
    }
    public var gamebaseProductId: String? {
        get { fields.value.gamebaseProductId }
        set { fields.value.gamebaseProductId = newValue }
    }
    public var marketId: String? {
        get { fields.value.marketId }
        set { fields.value.marketId = newValue }
    }
    public var price: String? {
        get { fields.value.price }
        set { fields.value.price = newValue }
    }
    public var currency: String? {
        get { fields.value.currency }
        set { fields.value.currency = newValue }
    }

    public init(
        paymentId: String? = nil, gamebaseProductId: String? = nil, marketId: String? = nil, price: String? = nil,
        currency: String? = nil
    ) {
        fields = CopyOnWrite(
            Fields(
                paymentId: paymentId, gamebaseProductId: gamebaseProductId, marketId: marketId, price: price,
                currency: currency))
    }
}

/// A message that arrived again after its purchase was decided: counted with the grant (or with the rejection of
/// that very message), never kept as a row of its own, so duplicates stay cheap.
public struct DuplicateNote: Sendable, Hashable {
    public var paymentSeq: String
    /// The rejected message it repeats; `nil` when it repeats the grant's message.
    public var rejection: RejectionKey?

    public init(paymentSeq: String, rejection: RejectionKey? = nil) {
        self.paymentSeq = paymentSeq
        self.rejection = rejection
    }
}

/// A dead letter as the ledger records it, beside the record in the dead-letter topic (which stays the record of
/// truth that `reprocess` reads): what `find` shows. Never the value or the token — their size and a hash.
public struct DeadLetterEntry: Sendable, Hashable {
    public var paymentSeq: String?
    public var userId: String?
    public var tokenHash: String?
    public var reason: String
    /// One line, as in the record's `iap-error` header.
    public var error: String
    public var attempts: Int
    /// Where the dead-letter record went; partition and offset are `nil` when the publisher did not say.
    public var deadLetterTopic: String
    public var deadLetterPartition: Int32?
    public var deadLetterOffset: Int64?
    /// Where the purchase message was first read.
    public var original: MessageSource?
    public var originalTimestampMilliseconds: Int64?
    public var failedAt: Date
    /// The size of the original value; `valueOmitted` when the record went without it (too large).
    public var valueBytes: Int
    public var valueOmitted: Bool
    /// What `reprocess` made of it, once it ran: a ``PurchaseOutcome`` label (`granted`, `duplicate`, `rejected`,
    /// `dead_lettered`, …).
    public var reprocessOutcome: String?
    public var reprocessedAt: Date?
    /// The ledger's id of its row (`dead_letters.id`), which orders the dead letters of one millisecond; `nil` until
    /// it is recorded (the ledger gives it, whatever an entry to record carries).
    public var ledgerID: Int64?

    public init(
        paymentSeq: String?, userId: String?, tokenHash: String?, reason: String, error: String, attempts: Int,
        deadLetterTopic: String, deadLetterPartition: Int32? = nil, deadLetterOffset: Int64? = nil,
        original: MessageSource?, originalTimestampMilliseconds: Int64?, failedAt: Date, valueBytes: Int,
        valueOmitted: Bool = false, reprocessOutcome: String? = nil, reprocessedAt: Date? = nil, ledgerID: Int64? = nil
    ) {
        self.paymentSeq = paymentSeq
        self.userId = userId
        self.tokenHash = tokenHash
        self.reason = reason
        self.error = error
        self.attempts = attempts
        self.deadLetterTopic = deadLetterTopic
        self.deadLetterPartition = deadLetterPartition
        self.deadLetterOffset = deadLetterOffset
        self.original = original
        self.originalTimestampMilliseconds = originalTimestampMilliseconds
        self.failedAt = failedAt
        self.valueBytes = valueBytes
        self.valueOmitted = valueOmitted
        self.reprocessOutcome = reprocessOutcome
        self.reprocessedAt = reprocessedAt
        self.ledgerID = ledgerID
    }

    /// Where it went, when the broker said.
    public var location: RecordLocation? {
        guard let deadLetterPartition, let deadLetterOffset else { return nil }
        return RecordLocation(topic: deadLetterTopic, partition: deadLetterPartition, offset: deadLetterOffset)
    }
}

/// One failed Consume call for a grant, as the ledger keeps it (the latest ``ConsumeAttempt/kept`` per grant). The
/// successful one is the grant row's own (`consumedAt`, `lastResultCode`, `consumeAttempts`): keeping it again would
/// cost every purchase a row.
public struct ConsumeAttempt: Sendable, Hashable {
    /// 1 for the first call.
    public var attempt: Int
    /// Gamebase's result code; `nil` for a transport failure.
    public var resultCode: Int?
    public var at: Date

    /// How many attempts are kept per grant: the latest ones (a grant whose Consume keeps failing is retried by the
    /// sweeper for as long as it takes, and its history must not grow with it).
    public static let kept = 32

    public init(attempt: Int, resultCode: Int?, at: Date) {
        self.attempt = attempt
        self.resultCode = resultCode
        self.at = at
    }
}

/// A payment the reconciler saw unconsumed at Gamebase with no decision in the ledger, not taken yet.
public struct ReconciliationSightingRecord: Sendable, Hashable {
    public var paymentSeq: String
    public var userId: String
    public var firstSeen: Date

    public init(paymentSeq: String, userId: String, firstSeen: Date) {
        self.paymentSeq = paymentSeq
        self.userId = userId
        self.firstSeen = firstSeen
    }
}

import Foundation

/// What ``PurchaseLedger/lookup(_:)`` found for one message: the grant of its paymentSeq and its own rejection.
public struct LedgerLookup: Sendable, Hashable {
    public var grant: GrantRecord?
    public var rejection: RejectionRecord?

    public init(grant: GrantRecord?, rejection: RejectionRecord?) {
        self.grant = grant
        self.rejection = rejection
    }
}

/// A grant and its outbox event, written together.
public struct GrantWrite: Sendable, Hashable {
    public var grant: GrantRecord
    public var event: OutboxEvent

    public init(grant: GrantRecord, event: OutboxEvent) {
        self.grant = grant
        self.event = event
    }
}

/// A rejection and its outbox event, written together.
public struct RejectionWrite: Sendable, Hashable {
    public var rejection: RejectionRecord
    public var event: OutboxEvent

    public init(rejection: RejectionRecord, event: OutboxEvent) {
        self.rejection = rejection
        self.event = event
    }
}

/// The outcome of a Consume call for a grant.
public struct ConsumeRecord: Sendable, Hashable {
    public var paymentSeq: String
    /// Consumed (or already consumed): `granted` → `consumed`. Otherwise a failed attempt is counted.
    public var consumed: Bool
    /// Gamebase's result code (0 or 5018 when consumed; nil for a transport failure).
    public var resultCode: Int?
    public var at: Date
    /// An event published before this outcome and not yet marked so: marked in the same transaction.
    public var publishedEventID: String?

    public init(paymentSeq: String, consumed: Bool, resultCode: Int?, at: Date, publishedEventID: String? = nil) {
        self.paymentSeq = paymentSeq
        self.consumed = consumed
        self.resultCode = resultCode
        self.at = at
        self.publishedEventID = publishedEventID
    }
}

/// An outbox event published at a time.
public struct PublishedEvent: Sendable, Hashable {
    public var id: String
    public var at: Date

    public init(id: String, at: Date) {
        self.id = id
        self.at = at
    }
}

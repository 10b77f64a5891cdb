import Foundation

/// A rejection and the duplicates of its message counted since.
public struct RejectionHistory: Sendable, Hashable {
    public var record: RejectionRecord
    public var duplicates: Int

    public init(record: RejectionRecord, duplicates: Int) {
        self.record = record
        self.duplicates = duplicates
    }
}

/// An outbox event as people see it: its id, topic and when it was written and published (not its payload).
public struct EventSummary: Sendable, Hashable {
    public var id: String
    public var topic: String
    public var createdAt: Date
    public var publishedAt: Date?

    public init(id: String, topic: String, createdAt: Date, publishedAt: Date?) {
        self.id = id
        self.topic = topic
        self.createdAt = createdAt
        self.publishedAt = publishedAt
    }
}

/// Everything the ledger holds about one paymentSeq.
public struct PurchaseHistory: Sendable, Hashable {
    public var paymentSeq: String?
    public var grant: GrantRecord?
    /// Messages that arrived again after the grant.
    public var grantDuplicates: Int
    /// When the grant was set aside: revoked by a refund, and Gamebase refused its Consume for good.
    public var consumeSetAsideAt: Date?
    public var rejections: [RejectionHistory]
    public var events: [EventSummary]
    /// Oldest first.
    public var consumeAttempts: [ConsumeAttempt]
    public var deadLetters: [DeadLetterEntry]
    public var sighting: ReconciliationSightingRecord?

    public init(
        paymentSeq: String?, grant: GrantRecord? = nil, grantDuplicates: Int = 0, consumeSetAsideAt: Date? = nil,
        rejections: [RejectionHistory] = [],
        events: [EventSummary] = [], consumeAttempts: [ConsumeAttempt] = [], deadLetters: [DeadLetterEntry] = [],
        sighting: ReconciliationSightingRecord? = nil
    ) {
        self.paymentSeq = paymentSeq
        self.grant = grant
        self.grantDuplicates = grantDuplicates
        self.consumeSetAsideAt = consumeSetAsideAt
        self.rejections = rejections
        self.events = events
        self.consumeAttempts = consumeAttempts
        self.deadLetters = deadLetters
        self.sighting = sighting
    }

    public var isEmpty: Bool {
        grant == nil && rejections.isEmpty && events.isEmpty && deadLetters.isEmpty && sighting == nil
    }

    /// The userId the purchase belongs to as far as the ledger knows: the grant's, else a Gamebase-confirmed
    /// rejection's, else the reconciler's sighting's, else the first claim's.
    public var userId: String? {
        if let grant { return grant.userId }
        if let confirmed = rejections.first(where: {
            ConsumeFailureReason(rawValue: $0.record.reason)?.confirmsUser == true
        }) {
            return confirmed.record.key.userId
        }
        if let sighting { return sighting.userId }
        return rejections.first?.record.key.userId ?? deadLetters.first?.userId
    }
}

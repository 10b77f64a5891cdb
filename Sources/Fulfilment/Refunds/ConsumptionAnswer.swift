import Foundation

/// What became of a consumption request, kept in the ledger: every attempt's outcome, the answer sent, or why the
/// worker gave up.
public struct ConsumptionAnswer: Sendable, Hashable {
    public enum State: String, Sendable, Hashable, CaseIterable {
        /// Not answered yet: tried again at `nextAttemptAt`.
        case pending
        /// Apple accepted the answer.
        case answered
        /// Not answered by the deadline, or refused by Apple as it is: no more attempts.
        case gaveUp = "gave_up"
    }

    public var notificationId: String
    public var transactionId: String
    public var state: State
    /// `DELIVERED` or an `UNDELIVERED_*` reason: what the ledger said (set once an answer was built).
    public var deliveryStatus: String?
    public var attempts: Int
    /// The last failure, one line without secrets.
    public var lastError: String?
    public var answeredAt: Date?
    public var nextAttemptAt: Date?

    public init(
        notificationId: String, transactionId: String, state: State, deliveryStatus: String? = nil, attempts: Int,
        lastError: String? = nil, answeredAt: Date? = nil, nextAttemptAt: Date? = nil
    ) {
        self.notificationId = notificationId
        self.transactionId = transactionId
        self.state = state
        self.deliveryStatus = deliveryStatus
        self.attempts = attempts
        self.lastError = lastError
        self.answeredAt = answeredAt
        self.nextAttemptAt = nextAttemptAt
    }
}

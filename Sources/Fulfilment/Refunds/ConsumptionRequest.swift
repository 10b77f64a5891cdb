import Foundation

/// An App Store `CONSUMPTION_REQUEST` to answer, as claimed from the ledger: the transaction Apple asks about, when
/// the answer is due (12 hours after Apple asked), and how many answers were tried.
public struct ConsumptionRequest: Sendable, Hashable {
    public var notificationId: String
    /// Apple's `transactionId`: the grant's store payment id (store code `AS`).
    public var transactionId: String
    public var deadline: Date
    public var attempts: Int
    /// Until when the claim is the claimer's: its answer is recorded only while the claim stands.
    public var claimedUntil: Date

    public init(notificationId: String, transactionId: String, deadline: Date, attempts: Int, claimedUntil: Date) {
        self.notificationId = notificationId
        self.transactionId = transactionId
        self.deadline = deadline
        self.attempts = attempts
        self.claimedUntil = claimedUntil
    }

    /// Apple's deadline for an answer, after it asks.
    public static let answerWindow: TimeInterval = 12 * 3_600
    /// ``answerWindow`` in the ledger's milliseconds (its queries add it to the request's time: store times are bounded
    /// to the year 9999, so the sum cannot overflow).
    public static let answerWindowMilliseconds = Int64(answerWindow * 1_000)
}

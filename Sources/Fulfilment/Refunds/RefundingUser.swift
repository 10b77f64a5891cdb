import Foundation

/// A user whose grants were revoked by refunds: how many, how many of those the store reversed since, and the latest.
public struct RefundingUser: Sendable, Hashable {
    public var userId: String
    public var revocations: Int
    public var reversed: Int
    /// When the worker recorded the latest of them.
    public var lastRecordedAt: Date

    public init(userId: String, revocations: Int, reversed: Int, lastRecordedAt: Date) {
        self.userId = userId
        self.revocations = revocations
        self.reversed = reversed
        self.lastRecordedAt = lastRecordedAt
    }
}

import Foundation

/// How many refund notifications of one kind and outcome were received on one UTC day.
public struct RefundDayCount: Sendable, Hashable {
    /// The day's start (00:00 UTC).
    public var day: Date
    public var kind: StoreNotification.Kind
    public var outcome: NotificationOutcome
    public var count: Int

    public init(day: Date, kind: StoreNotification.Kind, outcome: NotificationOutcome, count: Int) {
        self.day = day
        self.kind = kind
        self.outcome = outcome
        self.count = count
    }

    /// One UTC day, in the ledger's milliseconds.
    public static let dayMilliseconds: Int64 = 86_400_000

    /// The start of the UTC day of `epochMilliseconds` (the day a count of a time stored so goes to).
    public static func day(ofEpochMilliseconds milliseconds: Int64) -> Date {
        let start = milliseconds - ((milliseconds % dayMilliseconds) + dayMilliseconds) % dayMilliseconds
        return Date(epochMilliseconds: start)
    }
}

import Foundation

/// A refund notification as the console lists it: the record and the user of the grant it was matched to (`nil` for a
/// refund of a payment the ledger has not granted).
public struct RefundListing: Sendable, Hashable {
    public var record: StoreNotificationRecord
    public var userId: String?

    public init(record: StoreNotificationRecord, userId: String?) {
        self.record = record
        self.userId = userId
    }
}

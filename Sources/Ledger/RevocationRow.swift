import Foundation
import Fulfilment

struct RevocationRow {
    var paymentSeq: String
    var number: Int64
    var userId: String
    var store: String
    var notificationId: String
    var reason: String
    var storeReason: String?
    var quantity: Int64?
    var revokedAtMilliseconds: Int64
    var recordedAtMilliseconds: Int64
    var reversedBy: String?
    var reversedAtMilliseconds: Int64?

    func record() throws(LedgerError) -> RevocationRecord {
        guard let store = Store(rawValue: store) else {
            throw LedgerError(
                code: .query, message: "revocation of \(paymentSeq) has a store this version does not know")
        }
        return RevocationRecord(
            paymentSeq: paymentSeq, number: Int(clamping: number), userId: userId, store: store,
            notificationId: notificationId, reason: reason,
            storeReason: storeReason, quantity: quantity.map { Int(clamping: $0) },
            revokedAt: Date(epochMilliseconds: revokedAtMilliseconds),
            recordedAt: Date(epochMilliseconds: recordedAtMilliseconds), reversedBy: reversedBy,
            reversedAt: reversedAtMilliseconds.map(Date.init(epochMilliseconds:)))
    }
}

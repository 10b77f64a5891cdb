import Foundation
import Gamebase
import Wire

/// Builds the worker's events with their deterministic ids (DESIGN §2).
public struct EventFactory: Sendable {
    public var groupID: String {
        didSet { source = Self.source(groupID) }
    }
    public var itemGrantedTopic: String
    public var consumeFailedTopic: String
    /// Where item-revoked and refund-reversed events go (`kafka.topics.item_revoked`).
    public var itemRevokedTopic: String

    public static let itemGrantedType = "gamebase.iap.item.granted.v1"
    public static let consumeFailedType = "gamebase.iap.consume.failed.v1"
    public static let itemRevokedType = "gamebase.iap.item.revoked.v1"
    public static let refundReversedType = "gamebase.iap.refund.reversed.v1"

    public init(
        groupID: String, itemGrantedTopic: String, consumeFailedTopic: String,
        itemRevokedTopic: String = "iap.item-revoked"
    ) {
        self.groupID = groupID
        self.source = Self.source(groupID)
        self.itemGrantedTopic = itemGrantedTopic
        self.consumeFailedTopic = consumeFailedTopic
        self.itemRevokedTopic = itemRevokedTopic
    }

    /// The events' `source`, built once (it was built again for every event).
    private(set) var source: String

    static func source(_ groupID: String) -> String { "/iap-worker/\(groupID)" }

    public static func itemGrantedID(paymentSeq: String) -> String { "\(paymentSeq):item-granted" }

    static func rejectionID(_ message: PurchaseMessage) -> String {
        "\(message.paymentSeq):consume-failed:\(message.claimHash)"
    }

    public func itemGranted(_ grant: GrantRecord) -> OutboxEvent {
        let id = Self.itemGrantedID(paymentSeq: grant.paymentSeq)
        let grantedAt = RFC3339.string(grant.grantedAt)
        let data = ItemGrantedData(
            userId: grant.userId, paymentSeq: grant.paymentSeq, gamebaseProductId: grant.gamebaseProductId,
            productSeq: grant.productSeq, marketId: grant.marketId, productType: grant.productType,
            price: grant.price.flatMap(DecimalText.decimal), currency: grant.currency, paymentId: grant.paymentId,
            purchaseTime: grant.purchaseTime, payload: grant.payload, isTestPurchase: grant.isTestPurchase,
            grantedAt: grantedAt, source: grant.origin.rawValue)
        let event = CloudEvent(
            id: id, source: source, type: Self.itemGrantedType, subject: grant.paymentSeq, time: grantedAt, data: data)
        return OutboxEvent(
            id: id, paymentSeq: grant.paymentSeq, topic: itemGrantedTopic, key: Array(grant.userId.utf8),
            headers: Self.headers(id: id, type: Self.itemGrantedType), payload: event.encoded(),
            createdAt: grant.grantedAt)
    }

    /// A consume-failed event.
    /// - Parameters:
    ///   - id: the deterministic event id.
    ///   - key: the record key: the userId, or the original message's key when there is no userId.
    public func consumeFailed(
        id: String, userId: String?, paymentSeq: String?, reason: ConsumeFailureReason, resultCode: Int? = nil,
        resultMessage: String? = nil, attempts: Int, detail: String, key: [UInt8]?, at date: Date
    ) -> OutboxEvent {
        let data = ConsumeFailedData(
            userId: userId, paymentSeq: paymentSeq, reason: reason.rawValue, retryable: reason.isRetryable,
            resultCode: resultCode, resultMessage: resultMessage, attempts: attempts, detail: detail)
        let event = CloudEvent(
            id: id, source: source, type: Self.consumeFailedType, subject: paymentSeq, time: RFC3339.string(date),
            data: data)
        return OutboxEvent(
            id: id, paymentSeq: paymentSeq, topic: consumeFailedTopic, key: userId.map { Array($0.utf8) } ?? key,
            headers: Self.headers(id: id, type: Self.consumeFailedType), payload: event.encoded(), createdAt: date)
    }

    /// `<paymentSeq>:item-revoked` for a grant's first revocation, `<paymentSeq>:item-revoked:<n>` for its n-th.
    public static func itemRevokedID(paymentSeq: String, number: Int = 1) -> String {
        numbered("\(paymentSeq):item-revoked", number)
    }

    /// `<paymentSeq>:refund-reversed` for the reversal of a grant's first revocation, `…:refund-reversed:<n>` for the
    /// n-th's.
    public static func refundReversedID(paymentSeq: String, number: Int = 1) -> String {
        numbered("\(paymentSeq):refund-reversed", number)
    }

    private static func numbered(_ id: String, _ number: Int) -> String { number <= 1 ? id : "\(id):\(number)" }

    /// The item-revoked event of a grant's revocation: one per revocation, ever (its id is the grant's and the
    /// revocation's number).
    public func itemRevoked(
        _ grant: GrantRecord, _ revocation: RevocationRecord, channel: NotificationChannel, at date: Date
    ) -> OutboxEvent {
        revocationEvent(
            id: Self.itemRevokedID(paymentSeq: grant.paymentSeq, number: revocation.number), type: Self.itemRevokedType,
            grant, revocation,
            notificationId: revocation.notificationId, reversedAt: nil, channel: channel, at: date)
    }

    /// The refund-reversed event of a revocation undone, reported under the reversal's notification id.
    public func refundReversed(
        _ grant: GrantRecord, _ revocation: RevocationRecord, notification: StoreNotification,
        channel: NotificationChannel, at date: Date
    ) -> OutboxEvent {
        revocationEvent(
            id: Self.refundReversedID(paymentSeq: grant.paymentSeq, number: revocation.number),
            type: Self.refundReversedType, grant, revocation,
            notificationId: notification.notificationId, reversedAt: notification.occurredAt, channel: channel,
            at: date)
    }

    private func revocationEvent(
        id: String, type: String, _ grant: GrantRecord, _ revocation: RevocationRecord, notificationId: String,
        reversedAt: Date?, channel: NotificationChannel, at date: Date
    ) -> OutboxEvent {
        let data = RevocationData(
            userId: grant.userId, paymentSeq: grant.paymentSeq, gamebaseProductId: grant.gamebaseProductId,
            paymentId: grant.paymentId, price: grant.price.flatMap(DecimalText.decimal), currency: grant.currency,
            store: revocation.store.rawValue, reason: revocation.reason, partial: revocation.isPartial,
            storeReason: revocation.storeReason,
            quantity: revocation.quantity, revokedAt: RFC3339.string(revocation.revokedAt),
            reversedAt: reversedAt.map(RFC3339.string), notificationId: notificationId, source: channel.rawValue)
        let event = CloudEvent(
            id: id, source: source, type: type, subject: grant.paymentSeq, time: RFC3339.string(date), data: data)
        return OutboxEvent(
            id: id, paymentSeq: grant.paymentSeq, topic: itemRevokedTopic, key: Array(grant.userId.utf8),
            headers: Self.headers(id: id, type: type), payload: event.encoded(), createdAt: date)
    }

    /// Structured mode: the content type and nothing in the `ce_` namespace — the Kafka binding's SDKs read any
    /// `ce_` header as binary mode, and then refuse the event for lacking `ce_source`.
    static func headers(id: String, type: String) -> [EventHeader] {
        [EventHeader(name: "content-type", value: CloudEvent<ItemGrantedData>.contentType)]
    }
}

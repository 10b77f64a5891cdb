import Foundation
import Gamebase
import GamebaseSimulator
import Kafka

/// The demo's mixed batch: the payments Gamebase knows about and the purchase messages game servers send,
/// with what each kind should end as.
public struct DemoBatch: Sendable {
    public struct Kind: Sendable {
        public var label: String
        public var count: Int
    }

    public let payments: [SimulatedPayment]
    public let records: [KafkaProducerRecord]
    /// What was fed, in words, for the summary.
    public let kinds: [Kind]
    /// The purchases that should be granted.
    public let expectedGrants: Int

    /// - Parameter purchases: valid purchases in the batch; duplicates scale with it (one in ten, at least 3).
    public init(purchases: Int, topic: String = "purchase.completed") {
        var payments: [SimulatedPayment] = []
        var messages: [(key: String, value: String)] = []
        for i in 0..<purchases {
            payments.append(Self.payment("demo-\(i)", user: "player-\(i)"))
            if i == 0 {
                // A forged token sent with a real paymentSeq, ahead of the owner's message on the same partition:
                // rejected, and the owner's genuine message is still granted.
                messages.append(("player-0", Self.message("demo-0", user: "player-0", token: "forged-token")))
            }
            messages.append(("player-\(i)", Self.message("demo-\(i)", user: "player-\(i)")))
        }
        let duplicates = max(3, purchases / 10)
        for i in 0..<duplicates {
            // Under another key, so the duplicate lands on another partition than its original — except for
            // demo-0, whose forged-token message must stay the first one read for that paymentSeq.
            let n = purchases > 1 ? 1 + i % (purchases - 1) : 0
            messages.append((n == 0 ? "player-0" : "resent-\(i)", Self.message("demo-\(n)", user: "player-\(n)")))
        }
        // Someone else's purchase, claimed by another player first; the owner claims it afterwards. (Same key, so
        // the claim is read first: a claim arriving after the grant would simply be a duplicate.)
        payments.append(Self.payment("demo-owned", user: "player-owner"))
        messages.append(("player-owner", Self.message("demo-owned", user: "player-thief")))
        messages.append(("player-owner", Self.message("demo-owned", user: "player-owner")))
        payments.append(Self.payment("demo-subscription", user: "player-sub", type: GamebaseProductType.autoRenewable))
        messages.append(("player-sub", Self.message("demo-subscription", user: "player-sub")))
        payments.append(Self.payment("demo-elsewhere", user: "player-else", consumed: true))
        messages.append(("player-else", Self.message("demo-elsewhere", user: "player-else")))
        // Paid at Gamebase, never reported (the game lost its network after the payment): no message at all. Its
        // player sent another purchase, so the reconciler lists that player's unconsumed payments and grants it.
        payments.append(Self.payment(Self.unreported.paymentSeq, user: Self.unreported.userId))
        let malformed = [
            "this is not JSON", #"{"userId":42,"paymentSeq":"demo-x","purchaseToken":"t"}"#, #"["an","array"]"#,
            #"{"userId":"player-1","paymentSeq":"demo-1"}"#,
        ]
        for (i, value) in malformed.enumerated() { messages.append(("malformed-\(i)", value)) }

        self.payments = payments
        self.records = messages.map {
            KafkaProducerRecord(topic: topic, key: Array($0.key.utf8), value: Array($0.value.utf8))
        }
        self.kinds = [
            Kind(label: "valid purchases", count: purchases + 1), Kind(label: "duplicates", count: duplicates),
            Kind(label: "forged token", count: 1), Kind(label: "someone else's purchase", count: 1),
            Kind(label: "subscription", count: 1), Kind(label: "consumed elsewhere", count: 1),
            Kind(label: "malformed", count: malformed.count),
        ]
        self.expectedGrants = purchases + 2
    }

    /// The game's package name the demo's Google notifications carry (`refunds.google.package_name`).
    public static let packageName = "com.example.demo"
    /// The granted purchase the store refunds after the batch: its grant is revoked.
    public static let refunded = "demo-0"
    /// A store payment the ledger never sees, refunded: the refund is kept pending.
    public static let refundedUnseen = "GPA.demo-never-reported"

    /// Google's voided-purchase notification of `orderId`, as Kafka Connect puts it on the topic.
    public static func voided(_ orderId: String, at milliseconds: Int64) -> String {
        #"{"version":"1.0","packageName":"\#(packageName)","eventTimeMillis":"\#(milliseconds)","#
            + #""voidedPurchaseNotification":{"purchaseToken":"refund-token-\#(orderId)","orderId":"\#(orderId)","#
            + #""productType":2,"refundType":1}}"#
    }

    /// The purchase paid at Gamebase whose message never came: the reconciler's to find.
    public static let unreported = (paymentSeq: "demo-unreported", userId: "player-1")

    static func payment(
        _ seq: String, user: String, type: String = GamebaseProductType.consumable, consumed: Bool = false
    ) -> SimulatedPayment {
        SimulatedPayment(
            PaymentTransaction(
                paymentSeq: seq, userId: user, productSeq: 1001, currency: "USD", price: Decimal(string: "4.99"),
                marketId: "GG", accessToken: "token-\(seq)", paymentId: "GPA.\(seq)", productType: type,
                gamebaseProductId: "gems_500", purchaseTime: "2026-11-22T10:20:30+09:00", isTestPurchase: false),
            consumed: consumed)
    }

    static func message(_ seq: String, user: String, token: String? = nil) -> String {
        #"{"userId":"\#(user)","paymentSeq":"\#(seq)","purchaseToken":"\#(token ?? "token-\(seq)")","storeCode":"GG"}"#
    }
}

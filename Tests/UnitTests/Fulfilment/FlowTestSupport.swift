import Foundation
import Fulfilment
import Gamebase
import IAPTestSupport
import Logging

/// One flow under test: a fake Gamebase, a recording publisher and a real ledger.
struct FlowHarness: Sendable {
    let gamebase = FakeGamebase()
    let publisher = RecordingPublisher()
    let ledger: CrashingLedger
    let processor: PurchaseProcessor
    var topics: (granted: String, failed: String, dlq: String) {
        ("iap.item-granted", "iap.consume-failed", "purchase.completed.dlq")
    }

    init(ledger base: any TestLedger, rejectTestPurchases: Bool = false) {
        ledger = CrashingLedger(base)
        var logger = Logger(label: "flow.test")
        logger.logLevel = .critical
        processor = PurchaseProcessor(
            gamebase: gamebase, ledger: ledger, publisher: publisher,
            configuration: FulfilmentConfiguration(
                groupID: "iap-worker", workerName: "test-worker", rejectTestPurchases: rejectTestPurchases,
                verifyRetry: RetryPolicy(
                    maxAttempts: 3, initialBackoff: .milliseconds(1), maxBackoff: .milliseconds(2)),
                consumeRetry: RetryPolicy(
                    maxAttempts: 3, initialBackoff: .milliseconds(1), maxBackoff: .milliseconds(2))),
            logger: logger)
    }

    static func run<T: Sendable>(
        _ backend: LedgerBackend = .sqlite, rejectTestPurchases: Bool = false,
        _ body: @Sendable (FlowHarness) async throws -> T
    ) async throws -> T {
        try await TestDatabases.withFreshLedger(backend, maxConnections: 30) { store in
            try await body(FlowHarness(ledger: store, rejectTestPurchases: rejectTestPurchases))
        }
    }

    /// A payment Gamebase knows.
    @discardableResult
    func payment(
        _ seq: String, user: String = "owner", token: String? = nil, type: String = GamebaseProductType.consumable,
        test: Bool = false, consumed: Bool = false, product: String = "gem_pack_100"
    ) -> PaymentTransaction {
        let transaction = PaymentTransaction(
            paymentSeq: seq, userId: user, productSeq: 1000, currency: "KRW", price: Decimal(string: "1200.5"),
            marketId: "GG",
            accessToken: token ?? "tok-\(seq)", paymentId: "GPA.\(seq)", productType: type, gamebaseProductId: product,
            purchaseTime: "2024-05-13T10:20:30+09:00", payload: "{\"c\":1}", isTestPurchase: test)
        gamebase.add(transaction, consumed: consumed)
        return transaction
    }

    static func message(_ seq: String, user: String = "owner", token: String? = nil, product: String? = nil) -> [UInt8]
    {
        var object: [String: String] = ["paymentSeq": seq, "userId": user, "purchaseToken": token ?? "tok-\(seq)"]
        if let product { object["gamebaseProductId"] = product }
        return Array(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }

    static func input(_ value: [UInt8], offset: Int64 = 0, partition: Int32 = 0) -> PurchaseInput {
        PurchaseInput(
            key: Array("k".utf8), value: value, headers: [RecordHeader(name: "trace", string: "abc")],
            source: MessageSource(topic: "purchase.completed", partition: partition, offset: offset),
            timestamp: Date(timeIntervalSince1970: 1_700_000_000))
    }

    func process(_ seq: String, user: String = "owner", token: String? = nil, offset: Int64 = 0) async throws
        -> PurchaseOutcome
    {
        try await processor.process(Self.input(Self.message(seq, user: user, token: token), offset: offset))
    }
}

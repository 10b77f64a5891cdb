import Foundation
import Fulfilment
import Gamebase
import IAPTestSupport
import InMemoryLedger
import Logging

@testable import Engine

/// The engine and its services over memory ports: a memory purchase source, the memory ledger, a fake Gamebase, a
/// recording publisher and a test clock. No broker, no database, no HTTP, no real waiting.
struct EngineHarness: Sendable {
    static let topic = "purchase.completed"
    static let partition = SourcePartition(topic, 0)

    let source = MemoryPurchaseSource()
    let ledger = MemoryLedger()
    let gamebase = FakeGamebase()
    let publisher = RecordingPublisher()
    let metrics = RecordingMetrics()
    let clock = TestClock()
    let services: WorkerServices

    init(
        sweep: Sweeper.Configuration = .init(), reconcile: Reconciler.Configuration = .init(interval: .zero),
        retention: RetentionPolicy = .init(),
        reconciliation: (@Sendable (MemoryLedger) -> any ReconciliationLedger)? = nil
    ) {
        var logger = Logger(label: "engine.test")
        logger.logLevel = .critical
        let quick = RetryPolicy(maxAttempts: 2, initialBackoff: .milliseconds(1), maxBackoff: .milliseconds(1))
        services = WorkerServices(
            source: source, ledger: Self.roles(ledger, reconciliation: reconciliation), gamebase: gamebase,
            publisher: publisher,
            configuration: EngineConfiguration(
                engine: PurchaseEngine.Configuration(purchasesTopic: Self.topic, maxInFlight: 8),
                fulfilment: FulfilmentConfiguration(
                    groupID: "iap-worker", workerName: "engine-test", verifyRetry: quick, consumeRetry: quick),
                sweep: sweep, reconcile: reconcile, retention: retention),
            metrics: metrics, clock: clock, logger: logger)
    }

    /// The memory ledger's roles, its reconciliation role replaced when a test gives one.
    static func roles(
        _ ledger: MemoryLedger, reconciliation: (@Sendable (MemoryLedger) -> any ReconciliationLedger)?
    ) -> LedgerRoles {
        var roles = LedgerRoles(ledger)
        if let reconciliation { roles.reconciliation = reconciliation(ledger) }
        return roles
    }

    /// A payment Gamebase knows, and the purchase-completed message that reports it.
    @discardableResult
    func payment(_ seq: String, user: String = "owner") -> [UInt8] {
        gamebase.add(
            PaymentTransaction(
                paymentSeq: seq, userId: user, productSeq: 1000, currency: "KRW", price: Decimal(string: "1200"),
                marketId: "GG", accessToken: "tok-\(seq)", paymentId: "GPA.\(seq)",
                productType: GamebaseProductType.consumable, gamebaseProductId: "gem_pack_100",
                purchaseTime: "2024-05-13T10:20:30+09:00", payload: "", isTestPurchase: false))
        return Array(#"{"paymentSeq":"\#(seq)","userId":"\#(user)","purchaseToken":"tok-\#(seq)"}"#.utf8)
    }

    /// A grant written by a flow that then stopped (no Consume, event unpublished), at the clock's now.
    func unfinishedGrant(_ seq: String, user: String = "owner") async throws {
        payment(seq, user: user)
        let now = clock.now
        let grant = GrantRecord(
            paymentSeq: seq, userId: user, gamebaseProductId: "gem_pack_100", purchaseToken: "tok-\(seq)",
            productSeq: 1000, marketId: "GG", productType: GamebaseProductType.consumable, price: "1200",
            currency: "KRW", paymentId: "GPA.\(seq)", isTestPurchase: false,
            purchaseTime: "2024-05-13T10:20:30+09:00", payload: "", grantedAt: now,
            source: MessageSource(topic: Self.topic, partition: 0, offset: 0))
        let event = OutboxEvent(
            id: "\(seq):item-granted", paymentSeq: seq, topic: "iap.item-granted", key: Array(user.utf8), headers: [],
            payload: Array("{}".utf8), createdAt: now)
        _ = try await ledger.insertGrant(grant, event: event)
    }

    /// Waits (in real time, a millisecond at a time, 10 s at most) until `condition` holds: for tasks the clock woke
    /// to finish their work, never for the clock itself.
    static func eventually(_ what: String, _ condition: @Sendable () async throws -> Bool) async throws {
        try await waitUntil(what, within: .seconds(10), every: .milliseconds(1), condition)
    }
}

import Foundation
import Fulfilment
import Gamebase
import Synchronization

/// An in-memory Gamebase for the flow's tests: payments by token, scripted failures, and counts.
public final class FakeGamebase: GamebaseAPI {
    public struct State {
        public var payments: [String: PaymentTransaction] = [:]
        public var consumed: Set<String> = []
        public var verifyFailures: [GamebaseError] = []
        public var consumeFailures: [GamebaseError] = []
        /// Consume applies, then this error is thrown (a timeout after the fact).
        public var consumeAppliesThenFails: GamebaseError?
        /// Get Payment Transaction waits until its task is cancelled, then fails as a closed connection would.
        public var verifyHangsUntilCancelled = false
        public var verifyCalls = 0
        public var consumeCalls = 0
        public var successfulConsumes: [String: Int] = [:]
        /// The users of each List Consumables call, in order.
        public var listCalls: [String] = []
    }
    public let state = Mutex(State())

    public init() {}
    /// Runs inside every Get Payment Transaction call, before it answers (another worker acting meanwhile).
    public let verifyInterceptor = Mutex<(@Sendable (String) async -> Void)?>(nil)

    public func add(_ transaction: PaymentTransaction, consumed: Bool = false) {
        state.withLock {
            $0.payments[transaction.accessToken!] = transaction
            if consumed { $0.consumed.insert(transaction.paymentSeq) }
        }
    }

    public func failVerify(_ errors: [GamebaseError]) { state.withLock { $0.verifyFailures = errors } }
    public func failConsume(_ errors: [GamebaseError]) { state.withLock { $0.consumeFailures = errors } }
    public var verifyCalls: Int { state.withLock { $0.verifyCalls } }
    public var consumeCalls: Int { state.withLock { $0.consumeCalls } }
    public var listCalls: [String] { state.withLock { $0.listCalls } }
    public func successfulConsumes(_ seq: String) -> Int { state.withLock { $0.successfulConsumes[seq] ?? 0 } }

    public func paymentTransaction(accessToken: String, transactionID: GamebaseTransactionID)
        async throws(GamebaseError) -> PaymentTransaction
    {
        if let interceptor = verifyInterceptor.withLock({ $0 }) { await interceptor(accessToken) }
        if state.withLock({ $0.verifyHangsUntilCancelled }) {
            state.withLock { $0.verifyCalls += 1 }
            while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
            throw GamebaseError(
                code: .connection, api: "payment_transaction", transactionID: "t", message: "the connection closed")
        }
        let result: Result<PaymentTransaction, GamebaseError> = state.withLock { state in
            state.verifyCalls += 1
            if !state.verifyFailures.isEmpty { return .failure(state.verifyFailures.removeFirst()) }
            guard var payment = state.payments[accessToken] else {
                return .failure(Self.error(.invalidParameter, api: "payment_transaction"))
            }
            payment.isConsumable = !state.consumed.contains(payment.paymentSeq)
            return .success(payment)
        }
        return try result.get()
    }

    public func consume(paymentSeq: String, accessToken: String, transactionID: GamebaseTransactionID)
        async throws(GamebaseError) -> ConsumeOutcome
    {
        let result: Result<ConsumeOutcome, GamebaseError> = state.withLock { state in
            state.consumeCalls += 1
            if !state.consumeFailures.isEmpty { return .failure(state.consumeFailures.removeFirst()) }
            guard let payment = state.payments[accessToken], payment.paymentSeq == paymentSeq,
                GamebaseProductType.isConsumable(payment.productType)
            else { return .failure(Self.error(.consumeFailed, api: "consume")) }
            if state.consumed.contains(paymentSeq) { return .success(.alreadyConsumed) }
            state.consumed.insert(paymentSeq)
            state.successfulConsumes[paymentSeq, default: 0] += 1
            if let failure = state.consumeAppliesThenFails {
                state.consumeAppliesThenFails = nil
                return .failure(failure)
            }
            return .success(.consumed(ConsumeResult(gamebaseProductId: payment.gamebaseProductId)))
        }
        return try result.get()
    }

    public func listConsumables(userId: String, marketIds: [String]?, transactionID: GamebaseTransactionID)
        async throws(GamebaseError) -> [ConsumableItem]
    {
        state.withLock { $0.listCalls.append(userId) }
        return []
    }

    public static func error(_ code: GamebaseResultCode, api: String = "payment_transaction") -> GamebaseError {
        GamebaseError(
            code: .resultCode, api: api, resultCode: code, resultMessage: "fake", transactionID: "t",
            message: "fake \(code)")
    }

    public static let timeout = GamebaseError(code: .timeout, api: "consume", transactionID: "t", message: "no answer")
}

import Foundation
import Fulfilment
import Gamebase
import IAPTestSupport
import Synchronization

/// An in-memory Gamebase for the flow's tests: payments by token, scripted failures, and counts.
final class FakeGamebase: GamebaseAPI {
    struct State {
        var payments: [String: PaymentTransaction] = [:]
        var consumed: Set<String> = []
        var verifyFailures: [GamebaseError] = []
        var consumeFailures: [GamebaseError] = []
        /// Consume applies, then this error is thrown (a timeout after the fact).
        var consumeAppliesThenFails: GamebaseError?
        /// Get Payment Transaction waits until its task is cancelled, then fails as a closed connection would.
        var verifyHangsUntilCancelled = false
        var verifyCalls = 0
        var consumeCalls = 0
        var successfulConsumes: [String: Int] = [:]
    }
    let state = Mutex(State())
    /// Runs inside every Get Payment Transaction call, before it answers (another worker acting meanwhile).
    let verifyInterceptor = Mutex<(@Sendable (String) async -> Void)?>(nil)

    func add(_ transaction: PaymentTransaction, consumed: Bool = false) {
        state.withLock {
            $0.payments[transaction.accessToken!] = transaction
            if consumed { $0.consumed.insert(transaction.paymentSeq) }
        }
    }

    func failVerify(_ errors: [GamebaseError]) { state.withLock { $0.verifyFailures = errors } }
    func failConsume(_ errors: [GamebaseError]) { state.withLock { $0.consumeFailures = errors } }
    var verifyCalls: Int { state.withLock { $0.verifyCalls } }
    var consumeCalls: Int { state.withLock { $0.consumeCalls } }
    func successfulConsumes(_ seq: String) -> Int { state.withLock { $0.successfulConsumes[seq] ?? 0 } }

    func paymentTransaction(accessToken: String, transactionID: GamebaseTransactionID) async throws(GamebaseError) -> PaymentTransaction {
        if let interceptor = verifyInterceptor.withLock({ $0 }) { await interceptor(accessToken) }
        if state.withLock({ $0.verifyHangsUntilCancelled }) {
            state.withLock { $0.verifyCalls += 1 }
            while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
            throw GamebaseError(code: .connection, api: "payment_transaction", transactionID: "t", message: "the connection closed")
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

    func consume(paymentSeq: String, accessToken: String, transactionID: GamebaseTransactionID) async throws(GamebaseError) -> ConsumeOutcome {
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

    func listConsumables(userId: String, marketIds: [String]?, transactionID: GamebaseTransactionID) async throws(GamebaseError) -> [ConsumableItem] {
        []
    }

    static func error(_ code: GamebaseResultCode, api: String = "payment_transaction") -> GamebaseError {
        GamebaseError(code: .resultCode, api: api, resultCode: code, resultMessage: "fake", transactionID: "t", message: "fake \(code)")
    }

    static let timeout = GamebaseError(code: .timeout, api: "consume", transactionID: "t", message: "no answer")
}

/// Records what the flow publishes; can be told to fail.
final class RecordingPublisher: EventPublisher {
    struct State {
        var records: [OutboundRecord] = []
        var failuresLeft = 0
        /// Records larger than this (value, key and headers) are refused as too large, as a broker would.
        var maxRecordBytes = Int.max
    }
    let state = Mutex(State())

    struct PublishFailed: Error {}
    struct RecordTooLarge: Error {}

    func isRecordTooLarge(_ error: any Error) -> Bool { error is RecordTooLarge }

    func failNext(_ count: Int) { state.withLock { $0.failuresLeft = count } }

    func publish(_ record: OutboundRecord) async throws {
        try state.withLock { state in
            if state.failuresLeft > 0 {
                state.failuresLeft -= 1
                throw PublishFailed()
            }
            let size = record.value.count + (record.key?.count ?? 0)
                + record.headers.reduce(0) { $0 + $1.name.utf8.count + ($1.value?.count ?? 0) }
            if size > state.maxRecordBytes { throw RecordTooLarge() }
            state.records.append(record)
        }
    }

    var records: [OutboundRecord] { state.withLock { $0.records } }
    func records(on topic: String) -> [OutboundRecord] { records.filter { $0.topic == topic } }

    /// The CloudEvents published to `topic`, decoded.
    func events(on topic: String) -> [[String: Any]] {
        records(on: topic).compactMap { try? JSONSerialization.jsonObject(with: Data($0.value)) as? [String: Any] }
    }
}

/// A real ledger's purchases role that crashes (throws) at a chosen step, once. Its other roles are read through
/// ``base``.
final class CrashingLedger: PurchaseLedger {
    enum Step: String, CaseIterable, Sendable {
        case insertGrant, markPublished, markConsumed, recordConsumeFailure
    }
    /// Writes kept for people to read (`find`), refused once when chosen: not crash points of the flow.
    enum SupportWrite: Sendable {
        case recordDuplicates, recordDeadLetter
    }
    struct Crash: Error {}

    let base: any TestLedger
    let crashAt = Mutex<Step?>(nil)
    let refuseAt = Mutex<SupportWrite?>(nil)

    init(_ base: any TestLedger) { self.base = base }

    private func maybeCrash(_ step: Step) throws {
        try crashAt.withLock { crash in
            if crash == step {
                crash = nil
                throw Crash()
            }
        }
    }

    private func maybeRefuse(_ write: SupportWrite) throws {
        try refuseAt.withLock { refuse in
            if refuse == write {
                refuse = nil
                throw Crash()
            }
        }
    }

    func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult] {
        // A crash right after the commit: the grant is durable, nothing after it ran.
        let results = try await base.insertGrants(writes)
        try maybeCrash(.insertGrant)
        return results
    }

    func markPublished(_ events: [PublishedEvent]) async throws {
        try maybeCrash(.markPublished)
        try await base.markPublished(events)
    }

    func recordConsumes(_ records: [ConsumeRecord]) async throws -> [Bool] {
        // A Consume outcome marks its event published in the same transaction: a crash before it is one before both.
        if records.contains(where: \.consumed) { try maybeCrash(.markConsumed) }
        if records.contains(where: { !$0.consumed }) { try maybeCrash(.recordConsumeFailure) }
        if records.contains(where: { $0.publishedEventID != nil }) { try maybeCrash(.markPublished) }
        return try await base.recordConsumes(records)
    }

    func recordDuplicates(_ notes: [DuplicateNote]) async throws {
        try maybeRefuse(.recordDuplicates)
        try await base.recordDuplicates(notes)
    }

    func recordDeadLetter(_ entry: DeadLetterEntry) async throws {
        try maybeRefuse(.recordDeadLetter)
        try await base.recordDeadLetter(entry)
    }

    func lookup(_ keys: [RejectionKey]) async throws -> [LedgerLookup] { try await base.lookup(keys) }
    func grant(paymentSeq: String) async throws -> GrantRecord? { try await base.grant(paymentSeq: paymentSeq) }
    func event(id: String) async throws -> OutboxEvent? { try await base.event(id: id) }
    func insertRejections(_ writes: [RejectionWrite]) async throws -> [Bool] {
        try await base.insertRejections(writes)
    }

    // What the tests read of the other roles.
    func stats() async throws -> LedgerStats { try await base.stats() }
    func rejections(paymentSeq: String) async throws -> [RejectionRecord] {
        try await base.rejections(paymentSeq: paymentSeq)
    }
}

import Foundation
import Gamebase
import Synchronization

/// The simulator's payments, faults and counters. Thread-safe.
public final class SimulatorState: Sendable {
    struct Entry {
        var payment: SimulatedPayment
        /// The encoded `result` of Get Payment Transaction, cached per consumed state.
        var encoded: [Bool: [UInt8]] = [:]
    }

    struct Storage {
        var byToken: [String: Entry] = [:]
        var tokenBySeq: [String: String] = [:]
        /// Each user's payments' tokens, so List Consumables reads a user's payments, not every payment: the real
        /// service answers it from an index, and a scan of a 30-minute soak's 540,000 and more payments under this
        /// lock, 20 times a second, held up every Get Payment Transaction and Consume behind it. Kept by `add(_:)`,
        /// the only place a payment's token or user is set.
        var tokensByUser: [String: Set<String>] = [:]
        var faults: SimulatorFaults
        var calls: [String: Int] = [:]
        var consumes: [String: Int] = [:]
        var firstConsumedAt: [String: Date] = [:]
        /// List Consumables calls by userId, and when the latest of them came.
        var lists: [String: Int] = [:]
        var listTimes: [String: [Date]] = [:]
    }

    private let storage: Mutex<Storage>

    public init(payments: [SimulatedPayment] = [], faults: SimulatorFaults = SimulatorFaults()) {
        storage = Mutex(Storage(faults: faults))
        add(payments)
    }

    /// Adds payments, replacing any with the same access token.
    public func add(_ payments: [SimulatedPayment]) {
        storage.withLock { storage in
            for payment in payments {
                let token = payment.accessToken
                if let replaced = storage.byToken[token]?.payment.transaction.userId {
                    storage.tokensByUser[replaced]?.remove(token)
                    if storage.tokensByUser[replaced]?.isEmpty == true { storage.tokensByUser[replaced] = nil }
                }
                storage.byToken[token] = Entry(payment: payment)
                storage.tokenBySeq[payment.transaction.paymentSeq] = token
                storage.tokensByUser[payment.transaction.userId, default: []].insert(token)
            }
        }
    }

    public var faults: SimulatorFaults {
        get { storage.withLock { $0.faults } }
        set { storage.withLock { $0.faults = newValue } }
    }

    /// API calls answered, by API (`payment_transaction`, `consume`, `consumable`).
    public var calls: [String: Int] { storage.withLock { $0.calls } }

    /// Consumes that succeeded, by paymentSeq (more than 1 would be a simulator bug: a second one answers 5018).
    public var consumes: [String: Int] { storage.withLock { $0.consumes } }

    /// How many paymentSeqs have been consumed (cheaper than `consumes.count` for polling).
    public var consumedCount: Int { storage.withLock { $0.consumes.count } }

    /// When each paymentSeq was first consumed: the end of its purchase's journey (the benchmark's clock).
    public var firstConsumedAt: [String: Date] { storage.withLock { $0.firstConsumedAt } }

    /// List Consumables calls answered, by userId.
    public var listsByUser: [String: Int] { storage.withLock { $0.lists } }

    /// When each user's List Consumables calls came (the latest ``listTimesKept``), oldest first.
    public var listTimesByUser: [String: [Date]] { storage.withLock { $0.listTimes } }

    /// How many call times are kept per user.
    public static let listTimesKept = 100

    func countList(userId: String) {
        storage.withLock { storage in
            storage.lists[userId, default: 0] += 1
            var times = storage.listTimes[userId, default: []]
            times.append(Date())
            if times.count > Self.listTimesKept { times.removeFirst(times.count - Self.listTimesKept) }
            storage.listTimes[userId] = times
        }
    }

    /// The tokens List Consumables reads for `userId` (its index, for tests).
    func indexedTokens(userId: String) -> Set<String> {
        storage.withLock { $0.tokensByUser[userId] ?? [] }
    }

    public func payment(token: String) -> SimulatedPayment? {
        storage.withLock { $0.byToken[token]?.payment }
    }

    public func payment(paymentSeq: String) -> SimulatedPayment? {
        storage.withLock { storage in storage.tokenBySeq[paymentSeq].flatMap { storage.byToken[$0]?.payment } }
    }

    func countCall(_ api: String) {
        storage.withLock { $0.calls[api, default: 0] += 1 }
    }

    /// The encoded transaction for `token` (with `isConsumable` set from the consumed flag), or `nil`.
    func encodedTransaction(token: String) -> [UInt8]? {
        storage.withLock { storage -> [UInt8]? in
            guard var entry = storage.byToken[token] else { return nil }
            let consumed = entry.payment.consumed
            if let cached = entry.encoded[consumed] { return cached }
            var transaction = entry.payment.transaction
            transaction.isConsumable = !consumed
            let bytes = (try? JSONEncoder().encode(transaction)).map { Array($0) } ?? Array("{}".utf8)
            entry.encoded[consumed] = bytes
            storage.byToken[token] = entry
            return bytes
        }
    }

    enum ConsumeDecision {
        case consumed(SimulatedPayment)
        case alreadyConsumed
        case rejected
    }

    /// Consume: both must match one payment of a consumable type; once only.
    func consume(paymentSeq: String, token: String) -> ConsumeDecision {
        storage.withLock { storage in
            guard var entry = storage.byToken[token], entry.payment.transaction.paymentSeq == paymentSeq else {
                return .rejected
            }
            guard GamebaseProductType.isConsumable(entry.payment.transaction.productType) else { return .rejected }
            if entry.payment.consumed { return .alreadyConsumed }
            entry.payment.consumed = true
            storage.byToken[token] = entry
            storage.consumes[paymentSeq, default: 0] += 1
            if storage.firstConsumedAt[paymentSeq] == nil { storage.firstConsumedAt[paymentSeq] = Date() }
            return .consumed(entry.payment)
        }
    }

    /// The user's unconsumed consumable payments, filtered by store. An empty filter means every store but
    /// AMAZON (contract §6). With `listNonConsumables` (a fault setting), subscriptions are listed too.
    func consumables(userId: String, marketIds: [String]?) -> [PaymentTransaction] {
        let filter = Set(marketIds ?? [])
        return storage.withLock { storage in
            let everyType = storage.faults.listNonConsumables
            let tokens = storage.tokensByUser[userId] ?? []
            return tokens.compactMap { token -> PaymentTransaction? in
                guard let entry = storage.byToken[token] else { return nil }
                let transaction = entry.payment.transaction
                guard transaction.userId == userId, !entry.payment.consumed,
                    everyType || GamebaseProductType.isConsumable(transaction.productType)
                else { return nil }
                let market = transaction.marketId ?? ""
                if filter.isEmpty ? market == "AMAZON" : !filter.contains(market) { return nil }
                return transaction
            }
            .sorted { $0.paymentSeq < $1.paymentSeq }
        }
    }
}

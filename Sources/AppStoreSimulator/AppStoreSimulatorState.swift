import Crypto
import Foundation
import Synchronization
import Wire

/// What the App Store simulator knows and saw: the notifications it serves (each signed when added), the consumption
/// information it received, the calls it answered, and the failures it is told to answer with.
public final class AppStoreSimulatorState: Sendable {
    /// One notification of the history, signed.
    public struct Notification: Sendable, Hashable {
        public var uuid: String
        public var type: String
        public var signedDate: Date
        public var signedPayload: String
    }

    /// A Send Consumption Information call as received.
    public struct ConsumptionCall: Sendable, Hashable {
        public var transactionId: String
        /// The body's members as JSON text values (`"true"`, `"\"DELIVERED\""`).
        public var body: [String: String]
        public var at: Date
    }

    struct Storage {
        var notifications: [Notification] = []
        var consumptions: [ConsumptionCall] = []
        var calls: [String: Int] = [:]
        /// HTTP statuses to answer the next calls of a kind with (`history`, `consumption`), in order.
        var failures: [String: [Int]] = [:]
    }

    let storage = Mutex(Storage())
    public let chain: AppleSigningChain
    public let bundleId: String
    /// `Production` or `Sandbox`.
    public let environment: String
    /// How far back Get Notification History reaches: 180 days in production, 30 in the sandbox (Apple refuses an
    /// older `startDate` with errorCode 4000012, StartDateTooFarInPastError).
    public var historyDays: Int64 { environment == "Sandbox" ? 30 : 180 }

    public init(chain: AppleSigningChain, bundleId: String, environment: String = "Production") {
        self.chain = chain
        self.bundleId = bundleId
        self.environment = environment
    }

    /// Adds a notification of `type` about `transactionId`, signed now by the chain: its transaction (with a
    /// revocation for refunds) inside its data. `bundleId` and `environment` override the simulator's, for notifications
    /// the worker must refuse.
    @discardableResult
    public func addNotification(
        type: String, transactionId: String, productId: String = "gems.5000", signedDate: Date = Date(),
        revocationDate: Date? = nil, revocationReason: Int? = nil, uuid: String = UUID().uuidString.lowercased(),
        bundleId: String? = nil, environment: String? = nil
    ) throws -> Notification {
        let bundle = bundleId ?? self.bundleId
        let env = environment ?? self.environment
        let signedMillis = Int64((signedDate.timeIntervalSince1970 * 1_000).rounded())
        var transaction = ""
        JSONText.appendObject(to: &transaction) { object in
            object.string("transactionId", transactionId)
            object.string("originalTransactionId", transactionId)
            object.string("bundleId", bundle)
            object.string("productId", productId)
            object.string("type", "Consumable")
            object.integer("quantity", 1)
            object.string("environment", env)
            object.integer("signedDate", signedMillis)
            object.integer("revocationDate", revocationDate.map { Int64(($0.timeIntervalSince1970 * 1_000).rounded()) })
            object.integer("revocationReason", revocationReason)
        }
        let signedTransaction = try chain.sign(transaction)
        var payload = ""
        JSONText.appendObject(to: &payload) { object in
            object.string("notificationType", type)
            object.string("notificationUUID", uuid)
            object.string("version", "2.0")
            object.integer("signedDate", signedMillis)
            object.object("data") { data in
                data.string("bundleId", bundle)
                data.string("environment", env)
                data.string("signedTransactionInfo", signedTransaction)
            }
        }
        let notification = Notification(
            uuid: uuid, type: type, signedDate: signedDate, signedPayload: try chain.sign(payload))
        storage.withLock { $0.notifications.append(notification) }
        return notification
    }

    /// Adds a notification signed elsewhere (by another chain: one the worker must refuse).
    public func add(_ notification: Notification) {
        storage.withLock { $0.notifications.append(notification) }
    }

    /// Answers the next `count` calls of `kind` (`history` or `consumption`) with HTTP `status`.
    public func fail(_ kind: String, status: Int, count: Int = 1) {
        storage.withLock { $0.failures[kind, default: []] += Array(repeating: status, count: count) }
    }

    public var consumptions: [ConsumptionCall] { storage.withLock { $0.consumptions } }
    /// Calls answered, by kind (`history`, `consumption`, `unauthorized`).
    public var calls: [String: Int] { storage.withLock { $0.calls } }

    func count(_ kind: String) { storage.withLock { $0.calls[kind, default: 0] += 1 } }

    func nextFailure(_ kind: String) -> Int? {
        storage.withLock { storage in
            guard var queue = storage.failures[kind], !queue.isEmpty else { return nil }
            let status = queue.removeFirst()
            storage.failures[kind] = queue
            return status
        }
    }

    /// The notifications of `type` signed in `[start, end)`, oldest first.
    public func history(type: String, start: Date, end: Date) -> [Notification] {
        storage.withLock { storage in
            storage.notifications.filter { $0.type == type && $0.signedDate >= start && $0.signedDate < end }
                .sorted { ($0.signedDate, $0.uuid) < ($1.signedDate, $1.uuid) }
        }
    }

    func record(_ call: ConsumptionCall) { storage.withLock { $0.consumptions.append(call) } }
}

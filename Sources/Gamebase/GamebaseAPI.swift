/// The Gamebase server API calls of the consume flow. ``GamebaseClient`` implements it over HTTP; tests of
/// the flow implement it in memory.
public protocol GamebaseAPI: Sendable {
    /// Get Payment Transaction: the payment that `accessToken` (the SDK's `purchaseToken`) belongs to.
    /// - Throws: ``GamebaseError``.
    func paymentTransaction(accessToken: String, transactionID: GamebaseTransactionID) async throws(GamebaseError)
        -> PaymentTransaction

    /// Consume: marks the payment consumed. `5018` (already consumed) is returned as `.alreadyConsumed`.
    /// - Throws: ``GamebaseError``; on `.timeout` the consume may have applied.
    func consume(paymentSeq: String, accessToken: String, transactionID: GamebaseTransactionID)
        async throws(GamebaseError)
        -> ConsumeOutcome

    /// List Consumables: the user's completed but unconsumed payments, optionally for some stores only.
    func listConsumables(userId: String, marketIds: [String]?, transactionID: GamebaseTransactionID)
        async throws(GamebaseError)
        -> [ConsumableItem]

    /// A health probe: one call that depends on no purchase, without retries (see ``GamebaseProbeVerdict``).
    func probe(transactionID: GamebaseTransactionID) async -> GamebaseProbeVerdict
}

/// The names of the API's calls, as metrics and logs label them (`iap_gamebase_requests_total{api}`).
public enum GamebaseAPIName {
    public static let paymentTransaction = "payment_transaction"
    public static let consume = "consume"
    public static let consumable = "consumable"
    /// Health probes: a Get Payment Transaction call for a token that cannot exist.
    public static let healthProbe = "health_probe"
}

/// The `X-TCGB-Transaction-Id` of one logical operation, reused across its retries.
public struct GamebaseTransactionID: Hashable, Sendable, CustomStringConvertible {
    public let value: String
    public init(_ value: String) { self.value = value }
    /// A fresh random id.
    public init() { self.value = RandomUUID.string() }
    public var description: String { value }
}

/// What one health probe learned about Gamebase (see ``GamebaseAPI/probe(transactionID:)``).
public enum GamebaseProbeVerdict: Sendable, Equatable {
    /// Gamebase answered with a well-formed envelope (a refusal of the probe's made-up token included): the API
    /// works and accepts the worker's credentials.
    case answers
    /// Gamebase refuses the worker's configuration (secret key, app id, …).
    case misconfigured(GamebaseError)
    /// No usable answer: timeout, connection failure, an answer other than 200, a server-side error.
    case unavailable(GamebaseError)

    /// The access token of the probe: no store issues tokens of this shape, so a healthy Gamebase refuses it with
    /// a permanent code (1100, 5000 or a -400000x parameter error, contract §4).
    public static let probeToken = "iap-worker-health-probe-not-a-purchase"

    /// The verdict an answer to the probe gives.
    public init(_ result: Result<PaymentTransaction, GamebaseError>) {
        switch result {
        case .success:
            self = .answers
        case .failure(let error):
            switch error.kind {
            case .configuration:
                self = .misconfigured(error)
            case .permanent, .alreadyConsumed:
                self = .answers
            case .transient:
                // Server-side failure codes (9999 "unknown error" among them: Gamebase answers it when it fails
                // inside, and it is what a token Gamebase chokes on gets), transport failures, non-200 answers.
                self = .unavailable(error)
            }
        }
    }
}

extension GamebaseAPI {
    /// One Get Payment Transaction call, without retries, for a token that cannot exist: a refusal proves that
    /// Gamebase answers and accepts the worker's configuration, independently of any purchase.
    public func probe(transactionID: GamebaseTransactionID) async -> GamebaseProbeVerdict {
        do {
            return GamebaseProbeVerdict(
                .success(
                    try await paymentTransaction(
                        accessToken: GamebaseProbeVerdict.probeToken, transactionID: transactionID)))
        } catch {
            return GamebaseProbeVerdict(.failure(error))
        }
    }
}

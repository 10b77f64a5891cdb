import Crypto
import Foundation
import Synchronization
import Wire
import _CryptoExtras

/// What the Google Play simulator knows: the app, its voided purchases, the service account it trusts, the access
/// tokens it gave out, and the calls it answered (for the quotas and for tests).
public final class GooglePlaySimulatorState: Sendable {
    /// One voided purchase as the API lists it.
    public struct Voided: Sendable, Hashable {
        public var orderId: String
        public var purchaseToken: String
        public var purchaseTime: Date
        public var voidedTime: Date
        /// 0 user, 1 developer, 2 Google.
        public var voidedSource: Int
        /// 0 other, 1 remorse, 2 not received, 3 defective, 4 accidental purchase, 5 fraud, 6 friendly fraud,
        /// 7 chargeback.
        public var voidedReason: Int
        /// A quantity-based partial refund's units; `nil` for a whole void.
        public var voidedQuantity: Int?
        /// A subscription's void: listed only with `type=1`.
        public var isSubscription: Bool

        public init(
            orderId: String, purchaseToken: String, purchaseTime: Date? = nil, voidedTime: Date,
            voidedSource: Int = 0, voidedReason: Int = 1, voidedQuantity: Int? = nil, isSubscription: Bool = false
        ) {
            self.orderId = orderId
            self.purchaseToken = purchaseToken
            self.purchaseTime = purchaseTime ?? voidedTime.addingTimeInterval(-3_600)
            self.voidedTime = voidedTime
            self.voidedSource = voidedSource
            self.voidedReason = voidedReason
            self.voidedQuantity = voidedQuantity
            self.isSubscription = isSubscription
        }

        /// The entry's JSON, as the API writes it (times as strings of digits).
        public var json: String {
            var text = ""
            JSONText.appendObject(to: &text) { object in
                object.string("kind", "androidpublisher#voidedPurchase")
                object.string("purchaseToken", purchaseToken)
                object.string("purchaseTimeMillis", String(purchaseTime.epochMilliseconds))
                object.string("voidedTimeMillis", String(voidedTime.epochMilliseconds))
                object.string("orderId", orderId)
                object.integer("voidedSource", Int64(voidedSource))
                object.integer("voidedReason", Int64(voidedReason))
                if let voidedQuantity { object.integer("voidedQuantity", Int64(voidedQuantity)) }
            }
            return text
        }

        /// The real-time developer notification Google sends for the same void (its `eventTimeMillis` the void's
        /// time), as the Pub/Sub message's data would carry it.
        public func rtdn(packageName: String) -> String {
            var inner = ""
            JSONText.appendObject(to: &inner) { object in
                object.string("purchaseToken", purchaseToken)
                object.string("orderId", orderId)
                object.integer("productType", isSubscription ? 1 : 2)
                object.integer("refundType", (voidedQuantity ?? 0) > 0 ? 2 : 1)
            }
            var text = ""
            JSONText.appendObject(to: &text) { object in
                object.string("version", "1.0")
                object.string("packageName", packageName)
                object.string("eventTimeMillis", String(voidedTime.epochMilliseconds))
                object.raw("voidedPurchaseNotification", inner)
            }
            return text
        }
    }

    public let packageName: String
    /// The service account's email and the public half of its key (what Google holds).
    public let clientEmail: String
    public let keyId: String
    public let publicKey: _RSA.Signing.PublicKey
    /// Days of voided purchases the API shows.
    public static let historyDays: Int64 = 30
    /// Google's published quota: queries per day (Pacific time; here a rolling 24 hours) and per 30 seconds.
    public let dailyQuota: Int
    public let burstQuota: Int

    private struct Inner {
        var voided: [Voided] = []
        var tokens: [String: Date] = [:]
        var calls: [String: Int] = [:]
        var listCalls: [Date] = []
        var failures: [String: [Int]] = [:]
        var repeatsPageTokens = false
    }
    private let inner = Mutex(Inner())

    public init(
        packageName: String, clientEmail: String, keyId: String, publicKey: _RSA.Signing.PublicKey,
        dailyQuota: Int = 6_000,
        burstQuota: Int = 30
    ) {
        self.packageName = packageName
        self.clientEmail = clientEmail
        self.keyId = keyId
        self.publicKey = publicKey
        self.dailyQuota = dailyQuota
        self.burstQuota = burstQuota
    }

    /// Adds a voided purchase.
    public func add(_ voided: Voided) { inner.withLock { $0.voided.append(voided) } }

    /// The voided purchases of the window, the earliest void first.
    func voided(from start: Date, to end: Date, subscriptions: Bool, partials: Bool) -> [Voided] {
        inner.withLock { $0.voided }
            .filter {
                $0.voidedTime >= start && $0.voidedTime <= end && (subscriptions || !$0.isSubscription)
                    && (partials || ($0.voidedQuantity ?? 0) == 0)
            }
            .sorted { ($0.voidedTime, $0.orderId) < ($1.voidedTime, $1.orderId) }
    }

    /// Gives out an access token valid for `lifetime`.
    func issueToken(now: Date, lifetime: TimeInterval) -> String {
        let token = "ya29.sim-" + UUID().uuidString.lowercased()
        inner.withLock { $0.tokens[token] = now.addingTimeInterval(lifetime) }
        return token
    }

    /// Whether `token` was given out and is still valid.
    func isValid(token: String, now: Date) -> Bool {
        inner.withLock { $0.tokens[token].map { $0 > now } ?? false }
    }

    /// From now on a page asked with a token names that same token as the next one (a service that loops: the client
    /// must refuse it rather than read for ever).
    public func repeatPageTokens() { inner.withLock { $0.repeatsPageTokens = true } }
    var repeatsPageTokens: Bool { inner.withLock { $0.repeatsPageTokens } }

    /// Forgets every access token given out (as a key deleted in the console revokes them).
    public func revokeTokens() { inner.withLock { $0.tokens = [:] } }

    /// Counts a list call against the quotas; `false` when it is over one (the call is answered 429).
    func admitListCall(now: Date) -> Bool {
        inner.withLock { inner in
            inner.listCalls.removeAll { now.timeIntervalSince($0) >= 86_400 }
            let recent = inner.listCalls.filter { now.timeIntervalSince($0) < 30 }.count
            guard inner.listCalls.count < dailyQuota, recent < burstQuota else { return false }
            inner.listCalls.append(now)
            return true
        }
    }

    func count(_ kind: String) { inner.withLock { $0.calls[kind, default: 0] += 1 } }

    /// Calls answered, by kind: `token`, `token_refused`, `list`, `unauthorized`, `rate_limited`.
    public var calls: [String: Int] { inner.withLock { $0.calls } }

    /// Answers the next calls of `kind` (`token`, `list`) with these HTTP statuses, one each.
    public func fail(_ kind: String, with statuses: [Int]) {
        inner.withLock { $0.failures[kind, default: []].append(contentsOf: statuses) }
    }

    func nextFailure(_ kind: String) -> Int? {
        inner.withLock { inner in
            guard var queue = inner.failures[kind], !queue.isEmpty else { return nil }
            let status = queue.removeFirst()
            inner.failures[kind] = queue
            return status
        }
    }
}

extension GooglePlaySimulatorState {
    /// A service account's JSON key file as Google Cloud writes one, for `privateKey`, asking `tokenURI` for tokens.
    public static func serviceAccountKey(
        clientEmail: String, keyId: String, privateKey: _RSA.Signing.PrivateKey, tokenURI: String
    ) -> String {
        var text = ""
        JSONText.appendObject(to: &text) { object in
            object.string("type", "service_account")
            object.string("project_id", "iap-worker-sim")
            object.string("private_key_id", keyId)
            object.string("private_key", privateKey.pkcs8PEMRepresentation)
            object.string("client_email", clientEmail)
            object.string("client_id", "100000000000000000001")
            object.string("token_uri", tokenURI)
        }
        return text
    }
}

extension Date {
    /// Milliseconds since 1970, as Google writes its times.
    var epochMilliseconds: Int64 { Int64((timeIntervalSince1970 * 1_000).rounded(.down)) }
}

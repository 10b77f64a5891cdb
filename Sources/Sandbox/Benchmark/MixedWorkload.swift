import Foundation
import Gamebase
import GamebaseSimulator

/// The messages a live purchases topic carries, for `iap-dev bench mixed`: valid purchases among everything else
/// game servers and players send. Per 10,000 valid purchases, 16,512 messages:
///
/// | kind | per 10,000 valid | outcome |
/// |---|---|---|
/// | valid purchases (one in five with its store receipt forwarded whole, ~1.2 kB) | 10,000 | granted |
/// | duplicates under the purchase's own key, right after it | 1,500 | duplicate |
/// | duplicates under another key, a few hundred messages later | 1,500 | duplicate |
/// | claims of a real purchase by another player, sent before its owner's message (same key) | 1,000 | rejected |
/// | forged tokens (a paymentSeq and token Gamebase does not know) | 1,500 | rejected |
/// | stolen purchases (another player, another key, after the owner's) | 250 | rejected |
/// | subscriptions (not consumable) | 250 | rejected |
/// | purchases consumed elsewhere | 250 | rejected |
/// | paymentSeq/token mismatches (another purchase's real token) | 250 | rejected |
/// | malformed records, 12 kinds | 12 | malformed (dead-lettered) |
///
/// Counts scale with the valid purchases (rounded; the malformed kinds at least once each). The order is fixed for
/// a given size, so two builds meet the same sequence: each kind is spread through the run, not bunched.
public struct MixedWorkload: Sendable {
    public struct Message: Sendable {
        public var key: String
        public var value: [UInt8]
        /// The paymentSeq of a valid purchase's own message (its latency is measured); nil for every other message.
        public var validSeq: String?
        /// The player a valid purchase's own message grants it to.
        public var owner: String?
    }

    public struct Kind: Sendable, Codable {
        public var label: String
        public var count: Int
    }

    public let valid: Int
    public let messages: [Message]
    /// What Gamebase must know: the valid purchases, the subscriptions and the purchases consumed elsewhere.
    public let payments: [SimulatedPayment]
    public let kinds: [Kind]
    /// The worker's outcome counts (`iap_purchases_total{outcome}`) this workload must end in.
    public let expectedOutcomes: [String: Int]

    /// The kinds of malformed record, one of each per 10,000 valid purchases.
    static let malformed: [(label: String, value: [UInt8])] = [
        ("not JSON", Array("not JSON at all".utf8)),
        ("empty", []),
        ("a JSON array", Array(#"["u","p","t"]"#.utf8)),
        ("a number for userId", Array(#"{"userId":42,"paymentSeq":"bad-1","purchaseToken":"t"}"#.utf8)),
        ("no purchaseToken", Array(#"{"userId":"u","paymentSeq":"bad-2"}"#.utf8)),
        ("no paymentSeq", Array(#"{"userId":"u","purchaseToken":"t"}"#.utf8)),
        ("an empty paymentSeq", Array(#"{"userId":"u","paymentSeq":"","purchaseToken":"t"}"#.utf8)),
        ("null fields", Array(#"{"userId":null,"paymentSeq":null,"purchaseToken":null}"#.utf8)),
        (
            "invalid UTF-8",
            Array(#"{"userId":"u"#.utf8) + [0xC3, 0x28] + Array(#"","paymentSeq":"bad-3","purchaseToken":"t"}"#.utf8)
        ),
        (
            "a token over 8 kB",
            Array(
                #"{"userId":"u","paymentSeq":"bad-4","purchaseToken":"\#(String(repeating: "T", count: 9_000))"}"#.utf8)
        ),
        ("cut short", Array(#"{"userId":"u","paymentSeq":"bad-5","purchaseTo"#.utf8)),
        (
            "nested 200 deep",
            Array((String(repeating: #"{"a":"#, count: 200) + "1" + String(repeating: "}", count: 200)).utf8)
        ),
    ]

    /// A store receipt as a game server forwarding everything sends it: ~1.2 kB of base64.
    static let receipt: String = {
        var bytes = [UInt8](repeating: 0, count: 900)
        var x: UInt32 = 0x9E37_79B9
        for i in bytes.indices {
            x ^= x << 13
            x ^= x >> 17
            x ^= x << 5
            bytes[i] = UInt8(truncatingIfNeeded: x)
        }
        return Data(bytes).base64EncodedString()
    }()

    /// - Parameters:
    ///   - valid: valid purchases; every other kind scales with it.
    ///   - prefix: put before every id, so runs against one ledger or one Gamebase never meet.
    public init(valid: Int, prefix: String = "") {
        self.valid = valid
        func share(_ perTenThousand: Int) -> Int { (valid * perTenThousand + 5_000) / 10_000 }
        let p = prefix
        var payments: [SimulatedPayment] = []
        payments.reserveCapacity(valid + share(500))
        // Each message with a position: sorting by it spreads every kind through the run.
        var placed: [(position: Double, message: Message)] = []
        placed.reserveCapacity(valid * 16_512 / 10_000 + 16)
        func message(_ seq: String, user: String, token: String, receipt: Bool = false) -> [UInt8] {
            let whole = receipt ? #","receipt":"\#(Self.receipt)""# : ""
            return Array(
                #"{"userId":"\#(user)","paymentSeq":"\#(seq)","purchaseToken":"\#(token)","storeCode":"GG"\#(whole)}"#
                    .utf8)
        }
        /// A spread of `count` positions over the run, in a fixed order that is not the index order.
        func spread(_ index: Int, of count: Int) -> Double {
            guard count > 0 else { return 0 }
            return Double(Self.scramble(index, count)) * Double(valid) / Double(count) + 0.3
        }
        var counts: [String: Int] = [:]
        func place(_ kind: String, _ position: Double, _ message: Message) {
            placed.append((position, message))
            counts[kind, default: 0] += 1
        }

        let earlyClaims = share(1_000)
        let sameKeyDuplicates = share(1_500)
        let otherKeyDuplicates = share(1_500)
        for i in 0..<valid {
            let seq = "\(p)v\(i)"
            let user = "\(p)u\(i)"
            payments.append(DemoBatch.payment(seq, user: user))
            let position = Double(i)
            // Every tenth purchase is claimed by another player first, on the owner's key (so it is read first).
            if i % 10 == 5, i / 10 < earlyClaims {
                place(
                    Self.earlyClaim, position - 0.5,
                    Message(key: user, value: message(seq, user: "\(p)claimer\(i)", token: "token-\(seq)")))
            }
            place(
                Self.validPurchase, position,
                Message(
                    key: user, value: message(seq, user: user, token: "token-\(seq)", receipt: i % 5 == 2),
                    validSeq: seq, owner: user))
            if i % 20 < 3, i / 20 * 3 + i % 20 < sameKeyDuplicates {
                place(
                    Self.duplicate, position + 0.25,
                    Message(key: user, value: message(seq, user: user, token: "token-\(seq)")))
            }
            if i % 20 >= 10, i % 20 < 13, i / 20 * 3 + i % 20 - 10 < otherKeyDuplicates {
                let later = min(Double(valid), position + 100 + Double(i % 7) * 50)
                place(
                    Self.duplicate, later,
                    Message(key: "\(p)resent\(i)", value: message(seq, user: user, token: "token-\(seq)")))
            }
        }
        let forged = share(1_500)
        for k in 0..<forged {
            place(
                Self.forged, spread(k, of: forged),
                Message(
                    key: "\(p)f\(k)", value: message("\(p)forged\(k)", user: "\(p)fu\(k)", token: "forged-\(p)\(k)")))
        }
        let stolen = share(250)
        for k in 0..<stolen {
            let owner = Self.scramble(k, valid)
            place(
                Self.stolen, min(Double(valid), Double(owner) + 150),
                Message(
                    key: "\(p)thief\(k)",
                    value: message("\(p)v\(owner)", user: "\(p)thief\(k)", token: "token-\(p)v\(owner)")))
        }
        let subscriptions = share(250)
        for k in 0..<subscriptions {
            let seq = "\(p)sub\(k)"
            payments.append(DemoBatch.payment(seq, user: "\(p)su\(k)", type: GamebaseProductType.autoRenewable))
            place(
                Self.subscription, spread(k, of: subscriptions),
                Message(key: "\(p)su\(k)", value: message(seq, user: "\(p)su\(k)", token: "token-\(seq)")))
        }
        let elsewhere = share(250)
        for k in 0..<elsewhere {
            let seq = "\(p)else\(k)"
            payments.append(DemoBatch.payment(seq, user: "\(p)eu\(k)", consumed: true))
            place(
                Self.consumedElsewhere, spread(k, of: elsewhere),
                Message(key: "\(p)eu\(k)", value: message(seq, user: "\(p)eu\(k)", token: "token-\(seq)")))
        }
        let mismatches = share(250)
        for k in 0..<mismatches {
            let other = Self.scramble(k + 13, valid)
            place(
                Self.mismatch, spread(k, of: mismatches),
                Message(
                    key: "\(p)mu\(k)",
                    value: message("\(p)mismatch\(k)", user: "\(p)mu\(k)", token: "token-\(p)v\(other)")))
        }
        let malformedRounds = max(1, share(1))
        for round in 0..<malformedRounds {
            for (index, record) in Self.malformed.enumerated() {
                let slot = round * Self.malformed.count + index
                place(
                    Self.malformedRecord, spread(slot, of: malformedRounds * Self.malformed.count),
                    Message(key: "\(p)bad\(slot)", value: record.value))
            }
        }
        self.messages = placed.enumerated().sorted {
            ($0.element.position, $0.offset) < ($1.element.position, $1.offset)
        }.map(\.element.message)
        self.payments = payments
        self.kinds = Self.kindOrder.map { Kind(label: $0.label, count: counts[$0.label] ?? 0) }
        var expected: [String: Int] = [:]
        for kind in Self.kindOrder { expected[kind.outcome, default: 0] += counts[kind.label] ?? 0 }
        self.expectedOutcomes = expected
    }

    static let validPurchase = "valid purchases"
    static let duplicate = "duplicates (half under another key)"
    static let earlyClaim = "claims before the owner's message"
    static let forged = "forged tokens"
    static let stolen = "stolen purchases"
    static let subscription = "subscriptions"
    static let consumedElsewhere = "consumed elsewhere"
    static let mismatch = "paymentSeq/token mismatches"
    static let malformedRecord = "malformed (12 kinds)"

    /// Each kind with the outcome the worker counts for it (`iap_purchases_total{outcome}`).
    static let kindOrder: [(label: String, outcome: String)] = [
        (validPurchase, "granted"), (duplicate, "duplicate"), (earlyClaim, "rejected"), (forged, "rejected"),
        (stolen, "rejected"), (subscription, "rejected"), (consumedElsewhere, "rejected"), (mismatch, "rejected"),
        (malformedRecord, "malformed"),
    ]

    /// `index` of `0..<count` moved to another place of that range, one to one: the multiplier is a prime that does
    /// not divide `count`, so it has no factor in common with it.
    static func scramble(_ index: Int, _ count: Int) -> Int {
        guard count > 1 else { return 0 }
        let multiplier = [7_919, 7_927, 7_933].first { count % $0 != 0 } ?? 1
        return (index % count * multiplier + 104_729) % count
    }
}

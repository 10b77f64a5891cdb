import Foundation
import Fulfilment
import Gamebase
import InMemoryLedger
import Synchronization
import Wire

/// A Gamebase whose answers the fuzzer's input chooses (docs/fuzzing.md): refusals with any result code, transport
/// failures, and payments that are the message's own or hostile — another paymentSeq or userId, a look-alike in
/// Unicode, empty or huge identifiers, any product type, `isConsumable` nil, true or false.
///
/// It logs every payment it answered, and checks every Consume call against the ledger: Consume is only ever
/// called for a granted payment, with the grant's token.
public final class ScriptedGamebase: GamebaseAPI {
    /// The message being processed: "the same" and "a look-alike" are derived from it.
    public struct Claim: Sendable {
        public var paymentSeq: String
        public var userId: String
        public var token: String

        public init(paymentSeq: String, userId: String, token: String) {
            self.paymentSeq = paymentSeq
            self.userId = userId
            self.token = token
        }
    }

    /// A payment answered for a token.
    public struct Answer: Sendable {
        public var token: [UInt8]
        public var payment: PaymentTransaction
    }

    struct State {
        var script = FuzzBytes([])
        var claim: Claim?
        var answers: [Answer] = []
        var consumed: Set<[UInt8]> = []
    }

    let state = Mutex(State())
    let ledger: MemoryLedger

    public init(ledger: MemoryLedger) {
        self.ledger = ledger
    }

    /// Sets the script and the message for the calls that follow.
    public func script(_ bytes: [UInt8], claim: Claim?) {
        state.withLock {
            $0.script = FuzzBytes(bytes)
            $0.claim = claim
        }
    }

    public var answers: [Answer] { state.withLock { $0.answers } }

    static let refusalCodes: [GamebaseResultCode] = [
        .invalidParameter, .consumeFailed, .alreadyConsumed, .invalidSecretKey, .unknownError, .internalSystemError,
        .success, .missingParameter, .productNotEnabled, .internalDBError, GamebaseResultCode(-5_999_999),
        GamebaseResultCode(Int.min), GamebaseResultCode(Int.max),
    ]

    static func refusal(_ code: GamebaseResultCode, api: String) -> GamebaseError {
        GamebaseError(
            code: .resultCode, api: api, resultCode: code, resultMessage: "scripted", transactionID: "fuzz",
            message: "scripted \(code)")
    }

    static func failure(_ choice: UInt8, api: String) -> GamebaseError {
        switch choice % 4 {
        case 0: GamebaseError(code: .timeout, api: api, transactionID: "fuzz", message: "scripted timeout")
        case 1:
            GamebaseError(code: .invalidResponse, api: api, transactionID: "fuzz", message: "scripted invalid response")
        case 2:
            GamebaseError(code: .httpStatus, api: api, httpStatus: 502, transactionID: "fuzz", message: "scripted 502")
        default:
            GamebaseError(code: .invalidRequest, api: api, transactionID: "fuzz", message: "scripted invalid request")
        }
    }

    public func paymentTransaction(accessToken: String, transactionID: GamebaseTransactionID)
        async throws(GamebaseError)
        -> PaymentTransaction
    {
        let result: Result<PaymentTransaction, GamebaseError> = state.withLock { state in
            let claim = state.claim ?? Claim(paymentSeq: "p", userId: "u", token: accessToken)
            let payment: PaymentTransaction
            if state.script.isAtEnd {
                // Script exhausted: the genuine answer, as a Gamebase that knows this purchase gives it.
                payment = Self.genuine(claim, consumed: state.consumed.contains(Array(claim.paymentSeq.utf8)))
            } else {
                let op = state.script.byte()
                switch op % 8 {
                case 0, 1, 2: payment = Self.hostile(claim, &state.script)
                case 3:
                    return .failure(
                        Self.refusal(
                            Self.refusalCodes[Int(state.script.byte()) % Self.refusalCodes.count],
                            api: "payment_transaction"))
                case 4: return .failure(Self.failure(state.script.byte(), api: "payment_transaction"))
                default: payment = Self.genuine(claim, consumed: state.consumed.contains(Array(claim.paymentSeq.utf8)))
                }
            }
            state.answers.append(Answer(token: Array(accessToken.utf8), payment: payment))
            return .success(payment)
        }
        return try result.get()
    }

    static func genuine(_ claim: Claim, consumed: Bool) -> PaymentTransaction {
        PaymentTransaction(
            paymentSeq: claim.paymentSeq, userId: claim.userId, productSeq: 1_000_123, currency: "KRW",
            price: Decimal(string: "1200.5"), marketId: "GG", accessToken: claim.token, paymentId: "GPA.0000-1111",
            productType: GamebaseProductType.consumable, gamebaseProductId: "gem_pack_100",
            purchaseTime: "2024-05-13T10:20:30+09:00", payload: "{\"characterId\":\"c-42\"}", isTestPurchase: false,
            isConsumable: !consumed)
    }

    /// An identifier chosen by the script: the claim's own, a look-alike, empty, huge, or any text.
    static func identifier(_ own: String, _ script: inout FuzzBytes) -> String {
        switch script.byte() % 8 {
        case 0, 1: own
        case 2: lookAlike(own, script.byte())
        case 3: ""
        case 4: String(repeating: "9", count: (Int(script.byte()) + 1) * 1_024)
        case 5: own + String(decoding: script.field(), as: UTF8.self)
        default: String(decoding: script.field(), as: UTF8.self)
        }
    }

    /// A string that `==` may find equal to `own`, or that looks the same, but whose bytes differ.
    static func lookAlike(_ own: String, _ choice: UInt8) -> String {
        switch choice % 6 {
        case 0: return own.decomposedStringWithCanonicalMapping  // NFD: "é" becomes "e" + U+0301
        case 1: return own.precomposedStringWithCanonicalMapping  // NFC
        case 2: return own + "\u{0301}"  // a combining mark: another grapheme, another string
        case 3: return own + "\u{200B}"  // zero-width space
        case 4: return own.uppercased()
        default:
            // Cyrillic and fullwidth look-alikes of Latin letters and digits.
            var scalars = String.UnicodeScalarView()
            for scalar in own.unicodeScalars {
                switch scalar {
                case "a": scalars.append("\u{0430}")
                case "e": scalars.append("\u{0435}")
                case "o": scalars.append("\u{043E}")
                case "0"..."9": scalars.append(Unicode.Scalar(scalar.value - 0x30 + 0xFF10) ?? scalar)
                default: scalars.append(scalar)
                }
            }
            return String(scalars)
        }
    }

    static let productTypes: [String?] = [
        GamebaseProductType.consumable, GamebaseProductType.consumableAutoRenewable, GamebaseProductType.autoRenewable,
        nil,
        "consumable", "CONSUMABLE ", "",
    ]

    static func hostile(_ claim: Claim, _ script: inout FuzzBytes) -> PaymentTransaction {
        var payment = genuine(claim, consumed: false)
        payment.paymentSeq = identifier(claim.paymentSeq, &script)
        payment.userId = identifier(claim.userId, &script)
        switch script.byte() % 3 {
        case 0: payment.isConsumable = true
        case 1: payment.isConsumable = false
        default: payment.isConsumable = nil
        }
        let type = script.byte()
        payment.productType =
            Int(type) < productTypes.count ? productTypes[Int(type)] : String(decoding: script.field(), as: UTF8.self)
        switch script.byte() % 5 {
        case 0: break
        case 1: payment.gamebaseProductId = nil
        case 2: payment.gamebaseProductId = ""
        case 3: payment.gamebaseProductId = String(repeating: "g", count: (Int(script.byte()) + 1) * 1_024)
        default: payment.gamebaseProductId = String(decoding: script.field(), as: UTF8.self)
        }
        switch script.byte() % 3 {
        case 0: break
        case 1: payment.price = nil
        default: payment.price = GamebaseAnswers.decimal(script.field())
        }
        switch script.byte() % 3 {
        case 0: payment.isTestPurchase = false
        case 1: payment.isTestPurchase = true
        default: payment.isTestPurchase = nil
        }
        if script.byte() % 2 == 1 {
            payment.productSeq = script.int64()
            payment.currency = String(decoding: script.field(), as: UTF8.self)
            payment.marketId = String(decoding: script.field(), as: UTF8.self)
            payment.paymentId = String(decoding: script.field(), as: UTF8.self)
            payment.purchaseTime = String(decoding: script.field(), as: UTF8.self)
            payment.payload = String(decoding: script.field(), as: UTF8.self)
        }
        return payment
    }

    public func consume(paymentSeq: String, accessToken: String, transactionID: GamebaseTransactionID)
        async throws(GamebaseError)
        -> ConsumeOutcome
    {
        // Consume comes after the grant, for the grant's payment and token: never for a claim that was not granted.
        let grant = await fuzzRead("the ledger's grant") { try await ledger.grant(paymentSeq: paymentSeq) }
        fuzzCheck(grant != nil, "Consume called for a paymentSeq that has no grant")
        fuzzCheck(
            grant?.purchaseToken.hasSameBytes(as: accessToken) == true,
            "Consume called with a token that is not the grant's")
        let result: Result<ConsumeOutcome, GamebaseError> = state.withLock { state in
            let key = Array(paymentSeq.utf8)
            if !state.script.isAtEnd {
                let op = state.script.byte()
                switch op % 8 {
                case 0: return .failure(Self.refusal(.consumeFailed, api: "consume"))
                case 1:
                    return .failure(
                        Self.refusal(
                            Self.refusalCodes[Int(state.script.byte()) % Self.refusalCodes.count], api: "consume"))
                case 2: return .failure(Self.failure(state.script.byte(), api: "consume"))
                case 3:
                    // Applied, but the answer was lost.
                    state.consumed.insert(key)
                    return .failure(
                        GamebaseError(
                            code: .timeout, api: "consume", transactionID: "fuzz", message: "scripted timeout"))
                default: break
                }
            }
            if state.consumed.contains(key) { return .success(.alreadyConsumed) }
            state.consumed.insert(key)
            return .success(.consumed(ConsumeResult(gamebaseProductId: "gem_pack_100")))
        }
        // The client turns 5018 into `.alreadyConsumed`: a scripted 5018 refusal answers the same way.
        if case .failure(let error) = result, error.resultCode == .alreadyConsumed { return .alreadyConsumed }
        return try result.get()
    }

    public func listConsumables(userId: String, marketIds: [String]?, transactionID: GamebaseTransactionID)
        async throws(GamebaseError)
        -> [ConsumableItem]
    {
        []
    }
}

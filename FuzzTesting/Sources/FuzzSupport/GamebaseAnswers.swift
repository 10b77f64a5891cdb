import Foundation

@testable import Gamebase
@testable import Wire

/// The Gamebase answer target (docs/fuzzing.md): any bytes as the body of a Get Payment Transaction, Consume and
/// List Consumables answer, read as ``GamebaseClient`` reads them, and the probe's verdict on it.
public enum GamebaseAnswers {
    /// A price as the client reads one: nil unless the bytes are one JSON number that the reader takes as a decimal.
    public static func decimal(_ bytes: [UInt8]) -> Decimal? {
        var reader = JSONReader(bytes)
        guard let value = try? reader.readDecimal(), (try? reader.finish()) != nil else { return nil }
        return value
    }

    /// Follows a price the way the flow carries it into an item-granted event — kept in the grant as `"\(price)"`,
    /// read back with `Decimal(string:)`, written by `JSONObject.decimal` — and checks that it is never NaN, never
    /// changes, and is written as a JSON number.
    public static func checkPrice(_ price: Decimal?, _ what: String) {
        guard let price else { return }
        fuzzCheck(!price.isNaN, "\(what): a price read as NaN")
        let stored = "\(price)"
        guard let back = Decimal(string: stored) else {
            fuzzFailure("\(what): the stored price \(stored) does not read back")
        }
        fuzzCheck(!back.isNaN && back == price, "\(what): the price \(stored) reads back as \(back)")
        var json = ""
        JSONText.appendObject(to: &json) { $0.decimal("price", back) }
        // A JSON number (of any length: the reader's 64-character limit is for reading Gamebase, not for events).
        var reader = JSONReader(Array(json.utf8))
        var written: String?
        do {
            try reader.readObject { reader, _ throws(JSONReader.Failure) in
                let value = try reader.captureValue()
                if value.first == UInt8(ascii: "-")
                    || (value.first.map { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } ?? false)
                {
                    written = String(decoding: value, as: UTF8.self)
                }
            }
            try reader.finish()
        } catch {
            fuzzFailure("\(what): the price \(stored) is written as \(json), not JSON")
        }
        guard let written else { fuzzFailure("\(what): the price \(stored) is written as \(json), not a JSON number") }
        fuzzCheck(Decimal(string: written) == price, "\(what): the price \(stored) is written as \(json)")
        fuzzCheck(
            (try? JSONSerialization.jsonObject(with: Data(json.utf8))) != nil,
            "\(what): Foundation cannot read the price \(json)")
    }

    /// What the client makes of an answer's body: the envelope's result, or the error it throws.
    static func answer<Result>(
        _ body: [UInt8], api: String, result read: (inout JSONReader) throws(JSONReader.Failure) -> Result
    ) -> Swift.Result<Result?, GamebaseError> {
        let envelope: GamebaseEnvelope<Result>
        do {
            envelope = try GamebaseEnvelope.read(body, result: read)
        } catch {
            return .failure(GamebaseError(code: .invalidResponse, api: api, transactionID: "fuzz", message: "\(error)"))
        }
        guard envelope.header.isSuccessful else {
            return .failure(
                GamebaseError(
                    code: .resultCode, api: api, resultCode: GamebaseResultCode(envelope.header.resultCode),
                    resultMessage: envelope.header.resultMessage.map { String($0.prefix(200)) }, transactionID: "fuzz",
                    message: "refused"))
        }
        return .success(envelope.result)
    }

    /// The fields a payment must have, read again by Foundation's parser when it takes the body: the reader must not
    /// have made them up.
    static func checkAgainstFoundation(_ body: [UInt8], _ payment: PaymentTransaction) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let result = object["result"] as? [String: Any]
        else { return }
        if let seq = result["paymentSeq"] as? String {
            fuzzCheck(seq.hasSameBytes(as: payment.paymentSeq), "paymentSeq differs from Foundation's reading")
        }
        if let user = result["userId"] as? String {
            fuzzCheck(user.hasSameBytes(as: payment.userId), "userId differs from Foundation's reading")
        }
    }

    public static func check(_ body: [UInt8]) {
        // Get Payment Transaction, and the probe's verdict on the same answer.
        let payment = answer(body, api: "payment_transaction", result: PaymentTransaction.read)
        let probed: Result<PaymentTransaction, GamebaseError>
        switch payment {
        case .success(let read?):
            fuzzCheck(read.isConsumable != nil, "a payment read without isConsumable")
            checkPrice(read.price, "payment")
            checkAgainstFoundation(body, read)
            probed = .success(read)
        case .success(nil):
            probed = .failure(
                GamebaseError(code: .invalidResponse, api: "health_probe", transactionID: "fuzz", message: "no result"))
        case .failure(let error):
            probed = .failure(error)
        }
        let verdict = GamebaseProbeVerdict(probed)
        switch (probed, verdict) {
        case (.success, .answers): break
        case (.success, _): fuzzFailure("a payment read is not a verdict of answers")
        case (.failure(let error), .answers):
            fuzzCheck(
                error.code == .resultCode && error.kind != .transient && error.kind != .configuration,
                "\(error) judged as answers")
        case (.failure(let error), .misconfigured):
            fuzzCheck(error.kind == .configuration, "\(error) judged as misconfigured")
        case (.failure(let error), .unavailable):
            fuzzCheck(error.kind == .transient, "\(error) judged as unavailable")
        }

        // Consume.
        if case .success(let consumed?) = answer(body, api: "consume", result: ConsumeResult.read) {
            checkPrice(consumed.price, "consume result")
        }

        // List Consumables.
        if case .success(let items?) = answer(body, api: "consumable", result: ConsumableItem.readList) {
            for item in items { checkPrice(item.price, "consumable") }
        }

        // A bare result object, as the flow's fake Gamebase builds prices from.
        _ = decimal(body)
    }
}

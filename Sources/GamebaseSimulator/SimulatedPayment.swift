import Gamebase

/// A payment the simulator knows: the Get Payment Transaction fields plus whether it was consumed.
///
/// In a payments file it is one JSON object with the fields of `PaymentTransaction` and `"consumed"`;
/// `paymentSeq`, `userId` and `accessToken` are required.
public struct SimulatedPayment: Codable, Sendable, Hashable {
    public var transaction: PaymentTransaction
    public var consumed: Bool

    public init(_ transaction: PaymentTransaction, consumed: Bool = false) {
        self.transaction = transaction
        self.consumed = consumed
    }

    public var accessToken: String { transaction.accessToken ?? "" }

    private enum CodingKeys: String, CodingKey { case consumed }

    public init(from decoder: any Decoder) throws {
        transaction = try PaymentTransaction(from: decoder)
        consumed =
            try decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(Bool.self, forKey: .consumed) ?? false
        guard let token = transaction.accessToken, !token.isEmpty else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription: "payment \(transaction.paymentSeq) has no accessToken"))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        try transaction.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(consumed, forKey: .consumed)
    }
}

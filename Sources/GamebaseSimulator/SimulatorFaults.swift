/// What the simulator does wrong on purpose. Changeable while it runs (`POST /admin/faults`).
public struct SimulatorFaults: Codable, Sendable, Hashable {
    /// Added to every API answer.
    public var latencyMs: Int
    /// Share of API calls (0…1) answered with a transient failure: a T-class result code, or a 502/503 with a
    /// body that is not JSON.
    public var faultRate: Double
    /// Share of Consume calls that apply but answer only after `slowConsumeDelayMs` (past the client's timeout).
    public var slowConsumeRate: Double
    public var slowConsumeDelayMs: Int
    /// Share of answers that carry fields the contract does not list (the real server may add fields).
    public var unknownFieldRate: Double
    /// Every API call fails with a transient error (a Gamebase outage).
    public var outage: Bool
    /// The result code for an unknown access token (undocumented; 1100 by default).
    public var unknownTokenResultCode: Int
    /// Tokens that Get Payment Transaction answers with a given failure code on every call (a token Gamebase
    /// chokes on, e.g. 9999): a poison purchase.
    public var tokenResultCodes: [String: Int]
    /// PaymentSeqs whose Consume answers with a given failure code on every call (nothing is consumed): a grant whose
    /// Consume keeps failing.
    public var consumeResultCodes: [String: Int]
    /// List Consumables also lists unconsumed `AUTO_RENEWABLE` payments. Whether the real server does is unconfirmed
    /// (contract §6: the SDK's list has only consumable types); off, the simulator lists consumable types only.
    public var listNonConsumables: Bool

    public init(
        latencyMs: Int = 0, faultRate: Double = 0, slowConsumeRate: Double = 0, slowConsumeDelayMs: Int = 12_000,
        unknownFieldRate: Double = 0.1, outage: Bool = false, unknownTokenResultCode: Int = 1100,
        tokenResultCodes: [String: Int] = [:], listNonConsumables: Bool = false, consumeResultCodes: [String: Int] = [:]
    ) {
        self.latencyMs = latencyMs
        self.faultRate = faultRate
        self.slowConsumeRate = slowConsumeRate
        self.slowConsumeDelayMs = slowConsumeDelayMs
        self.unknownFieldRate = unknownFieldRate
        self.outage = outage
        self.unknownTokenResultCode = unknownTokenResultCode
        self.tokenResultCodes = tokenResultCodes
        self.listNonConsumables = listNonConsumables
        self.consumeResultCodes = consumeResultCodes
    }

    public init(from decoder: any Decoder) throws {
        // Every field is optional in a JSON update; missing ones keep their defaults.
        let defaults = SimulatorFaults()
        let c = try decoder.container(keyedBy: CodingKeys.self)
        latencyMs = try c.decodeIfPresent(Int.self, forKey: .latencyMs) ?? defaults.latencyMs
        faultRate = try c.decodeIfPresent(Double.self, forKey: .faultRate) ?? defaults.faultRate
        slowConsumeRate = try c.decodeIfPresent(Double.self, forKey: .slowConsumeRate) ?? defaults.slowConsumeRate
        slowConsumeDelayMs = try c.decodeIfPresent(Int.self, forKey: .slowConsumeDelayMs) ?? defaults.slowConsumeDelayMs
        unknownFieldRate = try c.decodeIfPresent(Double.self, forKey: .unknownFieldRate) ?? defaults.unknownFieldRate
        outage = try c.decodeIfPresent(Bool.self, forKey: .outage) ?? defaults.outage
        unknownTokenResultCode =
            try c.decodeIfPresent(Int.self, forKey: .unknownTokenResultCode) ?? defaults.unknownTokenResultCode
        tokenResultCodes =
            try c.decodeIfPresent([String: Int].self, forKey: .tokenResultCodes) ?? defaults.tokenResultCodes
        listNonConsumables =
            try c.decodeIfPresent(Bool.self, forKey: .listNonConsumables) ?? defaults.listNonConsumables
        consumeResultCodes =
            try c.decodeIfPresent([String: Int].self, forKey: .consumeResultCodes) ?? defaults.consumeResultCodes
    }
}

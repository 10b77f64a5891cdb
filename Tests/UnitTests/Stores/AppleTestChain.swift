import AppStoreSimulator
import Foundation

/// The tests' chain: the simulator's, built around one fixed signing time, so the tests mean the same whenever they
/// run.
typealias AppleTestChain = AppleSigningChain

extension AppleSigningChain {
    /// The time the tests' payloads say they were signed (2025-11-24T16:00:00Z).
    static let signedAt = Date(timeIntervalSince1970: 1_764_000_000)
    /// When the tests receive what was signed: a day later.
    static let receivedAt = signedAt.addingTimeInterval(86_400)

    init(
        validFrom: Date = signedAt.addingTimeInterval(-86_400 * 730),
        validUntil: Date = signedAt.addingTimeInterval(86_400 * 730), leafMarked: Bool = true,
        intermediateMarked: Bool = true, name: String = "Test"
    ) throws {
        try self.init(
            around: Self.signedAt, validFrom: validFrom, validUntil: validUntil, leafMarked: leafMarked,
            intermediateMarked: intermediateMarked, name: name)
    }
}

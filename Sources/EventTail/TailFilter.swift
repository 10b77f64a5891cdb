import Foundation

/// Which events `events tail` shows: every condition given must hold (exact, byte-for-byte matches).
public struct TailFilter: Sendable, Hashable {
    /// Shown kinds; empty shows all.
    public var kinds: Set<TailEvent.Kind>
    public var userId: String?
    public var paymentSeq: String?
    /// consume-failed `data.reason` or dead-letter `iap-reason`; an item-granted event has none, so never matches.
    public var reason: String?

    public init(
        kinds: Set<TailEvent.Kind> = [], userId: String? = nil, paymentSeq: String? = nil, reason: String? = nil
    ) {
        self.kinds = kinds
        self.userId = userId
        self.paymentSeq = paymentSeq
        self.reason = reason
    }

    public func matches(_ event: TailEvent) -> Bool {
        if !kinds.isEmpty, !kinds.contains(event.kind) { return false }
        if let userId, event.userId != userId { return false }
        if let paymentSeq, event.paymentSeq != paymentSeq { return false }
        if let reason, event.reason != reason { return false }
        return true
    }

    /// Parses `--type` values: each repeatable, each a comma-separated list of kinds.
    ///
    /// - Throws: ``TailArgumentError`` naming the unknown kind.
    public static func kinds(_ values: [String]) throws(TailArgumentError) -> Set<TailEvent.Kind> {
        var kinds: Set<TailEvent.Kind> = []
        for value in values {
            for name in value.split(separator: ",", omittingEmptySubsequences: false) {
                let trimmed = name.trimmingCharacters(in: .whitespaces)
                guard let kind = TailEvent.Kind(rawValue: trimmed) else {
                    throw TailArgumentError(
                        "--type takes \(TailEvent.Kind.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(trimmed)\""
                    )
                }
                kinds.insert(kind)
            }
        }
        return kinds
    }
}

/// An argument of `events tail` that cannot be used.
public struct TailArgumentError: Error, CustomStringConvertible, Sendable, Hashable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// `--since` durations: a positive whole number and a unit, `30s`, `10m`, `2h`, `1d`.
public enum TailDuration {
    /// The duration in milliseconds.
    ///
    /// - Throws: ``TailArgumentError`` for anything else (no unit, zero, a fraction, over 10 years).
    public static func milliseconds(_ text: String) throws(TailArgumentError) -> Int64 {
        let units: [Character: Int64] = ["s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000]
        guard let unit = text.last, let scale = units[unit], let number = Int64(text.dropLast()),
            text.dropLast().allSatisfy(\.isASCII), number > 0, number <= 3_650 * 86_400_000 / scale
        else {
            throw TailArgumentError("--since takes a positive duration like 30s, 10m, 2h or 1d, got \"\(text)\"")
        }
        return number * scale
    }
}

import Foundation
import Synchronization

/// Prices between text and `Decimal`, remembered: Foundation's `Decimal(string:)` and `description` cost a dozen
/// allocations and a few µs each, and every purchase needs both (Gamebase's answer is read, the grant stores the
/// price as text, the event writes it as a number). Prices come from a catalogue, so a few hundred values cover a
/// game; beyond ``capacity`` distinct values, new ones are converted without being remembered.
///
/// A remembered description is that of the first value seen among those equal to it: `4.99` and `4.990` are one
/// number and would be written alike (the values read from JSON are always in their shortest form).
public enum DecimalText {
    public static let capacity = 512

    private struct Cache {
        var descriptions: [Decimal: String] = [:]
        var decimals: [String: Decimal] = [:]
    }

    private static let cache = Mutex(Cache())

    /// `value.description`.
    public static func description(_ value: Decimal) -> String {
        if let known = cache.withLock({ $0.descriptions[value] }) { return known }
        let text = value.description
        cache.withLock { cache in
            if cache.descriptions.count < capacity { cache.descriptions[value] = text }
        }
        return text
    }

    /// `Decimal(string: text, locale: nil)`: `nil` when `text` is no decimal number.
    public static func decimal(_ text: String) -> Decimal? {
        if let known = cache.withLock({ $0.decimals[text] }) { return known }
        guard let value = Decimal(string: text, locale: nil) else { return nil }
        // Only short texts are kept: they are stored inline, so remembering one allocates nothing.
        if text.utf8.count <= 15, !value.isNaN {
            cache.withLock { cache in
                if cache.decimals.count < capacity { cache.decimals[text] = value }
            }
        }
        return value
    }
}

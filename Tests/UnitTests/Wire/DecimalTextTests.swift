import Foundation
import Testing
import Wire

/// Prices are converted through a memory of the catalogue's values: what it answers must be what Foundation answers,
/// the first time and every time after, also once it is full.
@Suite("Prices between text and Decimal")
struct DecimalTextTests {
    @Test func textsReadAsFoundationReadsThemEveryTime() {
        let texts = [
            "4.99", "0", "-0.5", "1000", "1e3", "12345678901234567890.123", "0.0000001", "-7", "4.990", "abc", "",
            "1.2.3",
            "99999999999999999999999999999999999999",
        ]
        for _ in 0..<3 {
            for text in texts {
                #expect(DecimalText.decimal(text) == Decimal(string: text, locale: nil), "\(text)")
            }
        }
    }

    @Test func valuesAreDescribedAsFoundationDescribesThemAlsoBeyondTheMemorysCapacity() throws {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<(DecimalText.capacity * 2 + 10) {
            let cents = Int64.random(in: -10_000_000...10_000_000, using: &generator)
            let value = try #require(Decimal(string: "\(cents / 100).\(String(format: "%02d", abs(cents % 100)))"))
            #expect(DecimalText.description(value) == value.description, "round \(round): \(value)")
            #expect(DecimalText.description(value) == value.description, "remembered: \(value)")
            let text = value.description
            #expect(DecimalText.decimal(text) == value)
        }
    }
}

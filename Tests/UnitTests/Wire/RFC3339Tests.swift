import Foundation
import Testing
import Wire

/// Every log line and event carries a time written by hand, byte by byte: it must be what Foundation's formatter
/// writes, and RFC 3339 at the ends of what a Date can hold.
@Suite("RFC 3339 times")
struct RFC3339Tests {
    @Test func knownInstantsAreWrittenInUTCWithMilliseconds() {
        #expect(RFC3339.string(epochMilliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(RFC3339.string(epochMilliseconds: 1_700_000_000_123) == "2023-11-14T22:13:20.123Z")
        #expect(RFC3339.string(epochMilliseconds: -1) == "1969-12-31T23:59:59.999Z")
        #expect(RFC3339.string(epochMilliseconds: 951_782_400_007) == "2000-02-29T00:00:00.007Z")
    }

    @Test func instantsBeyondYears1To9999AreWrittenAsTheNearestEnd() {
        #expect(RFC3339.string(epochMilliseconds: .max) == "9999-12-31T23:59:59.999Z")
        #expect(RFC3339.string(epochMilliseconds: .min) == "0001-01-01T00:00:00.000Z")
        #expect(RFC3339.string(Date(timeIntervalSince1970: .infinity)) == "9999-12-31T23:59:59.999Z")
        #expect(RFC3339.string(Date(timeIntervalSince1970: -.infinity)) == "0001-01-01T00:00:00.000Z")
        #expect(RFC3339.string(Date(timeIntervalSince1970: .nan)).count == 24)
    }

    @Test func whatIsWrittenIsWhatFoundationWritesAndReadsBack() throws {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            // Years 1970 to about 2600, to the millisecond.
            let milliseconds = Int64.random(in: 0...20_000_000_000_000, using: &generator)
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            let text = RFC3339.string(epochMilliseconds: milliseconds)
            #expect(text == formatter.string(from: date), "\(milliseconds)")
            let read = try #require(RFC3339.date(text))
            #expect(Int64((read.timeIntervalSince1970 * 1000).rounded()) == milliseconds)
        }
    }

    @Test func timesWithAnOffsetOrAnyFractionAreReadAsFoundationReadsThem() throws {
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let whole = ISO8601DateFormatter()
        whole.formatOptions = [.withInternetDateTime]
        let texts = [
            "2026-11-22T10:20:30Z", "2026-11-22T10:20:30.1Z", "2026-11-22T10:20:30.123+09:00",
            "2026-11-22T00:20:30.5-05:30", "2000-02-29T23:59:59.999+14:00", "1969-12-31T23:59:59.999Z",
            "1970-01-01T00:00:00-00:00", "9999-12-31T23:59:59.999Z", "2024-02-29T12:00:00+23:59",
        ]
        for text in texts {
            let expected = try #require(fractional.date(from: text) ?? whole.date(from: text), "\(text)")
            let read = try #require(RFC3339.date(text), "\(text)")
            #expect(abs(read.timeIntervalSince1970 - expected.timeIntervalSince1970) < 0.000_5, "\(text)")
        }
        // Before 1582 Foundation counts in the Julian calendar; RFC 3339, gmtime and this reader in the Gregorian one,
        // so the earliest time written reads back as itself.
        let first = try #require(RFC3339.date("0001-01-01T00:00:00.000Z"))
        #expect(RFC3339.string(first) == "0001-01-01T00:00:00.000Z")
        #expect(RFC3339.date(RFC3339.string(epochMilliseconds: -1_000_000_000_000_000)) == first)
    }

    @Test func rfc3339sOwnVariantsAreRead() throws {
        let upper = try #require(RFC3339.date("2026-11-22T10:20:30.123Z"))
        #expect(RFC3339.date("2026-11-22t10:20:30.123z") == upper)
        // Digits beyond the millisecond, up to nanoseconds kept and past them read and left.
        let fine = try #require(RFC3339.date("2026-11-22T10:20:30.123456789123456789Z"))
        #expect(abs(fine.timeIntervalSince(upper) - 0.000_456_789) < 0.000_001)
        // A leap second is the next minute's first.
        #expect(RFC3339.date("2016-12-31T23:59:60Z") == RFC3339.date("2017-01-01T00:00:00Z"))
    }

    @Test func anythingButOneWholeTimeIsRefused() {
        let refused = [
            "", "2026", "2026-11-22", "2026-11-22T10:20:30", "2026-11-22T10:20:30.Z", "2026-11-22T10:20:30.123",
            "2026-11-22T10:20:30Zjunk", "2026-11-22T10:20:30.123Z/id", " 2026-11-22T10:20:30Z", "2026-11-22 10:20:30Z",
            "2026-11-22T10:20:30+0900", "2026-11-22T10:20:30+09", "2026-11-22T10:20:30+24:00",
            "2026-11-22T10:20:30+09:60", "2026-13-22T10:20:30Z", "2026-00-22T10:20:30Z", "2026-11-00T10:20:30Z",
            "2026-11-31T10:20:30Z", "2026-02-29T10:20:30Z", "1900-02-29T10:20:30Z", "2026-11-22T24:00:00Z",
            "2026-11-22T10:60:30Z", "2026-11-22T10:20:61Z", "+2026-11-22T10:20:30Z", "20261-11-22T10:20:30Z",
            "2026-1-22T10:20:30Z", "２０２６-11-22T10:20:30Z", "2026-11-22T10:20:30\u{0}Z",
            "2026-11-22T10:20:30." + String(repeating: "1", count: 8_192) + "x",
            String(repeating: "9", count: 1_048_576),
        ]
        for text in refused {
            #expect(RFC3339.date(text) == nil, "\(text.prefix(40))")
        }
        #expect(RFC3339.date("2024-02-29T10:20:30Z") != nil)
        #expect(RFC3339.date("2000-02-29T10:20:30Z") != nil)
    }
}

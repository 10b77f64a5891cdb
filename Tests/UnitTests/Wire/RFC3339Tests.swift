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
}

import Foundation
import Testing

@testable import Sandbox

/// `bench soak` passes a run whose memory at its last minute is within the allowed growth of minute 5's, and says
/// nothing — never "flat" — when the run was too short or a sample is not a size.
@Suite("The soak's memory verdict")
struct SoakVerdictTests {
    @Test func theLastMinuteIsComparedWithTheFifth() throws {
        // Minutes 1–4 fill buffers and pools: a rise there is no growth.
        let samples: [Double] = [40, 55, 60, 62, 64] + Array(repeating: 66, count: 24) + [70]
        let verdict = try #require(SoakVerdict(minuteSamplesMiB: samples))
        #expect(verdict.settledMiB == 64 && verdict.lastMiB == 70 && verdict.lastMinute == 30)
        #expect(abs(verdict.growth - 0.09375) < 1e-9)
        #expect(verdict.isFlat)
        #expect(verdict.summary == "RSS at minute 5: 64.0 MiB, at minute 30: 70.0 MiB (+9.4 %): flat (within 10 %)")
    }

    @Test func growthBeyondTheAllowanceIsNotFlat() throws {
        let samples: [Double] = [50, 50, 50, 50, 100, 105, 110.1]
        let verdict = try #require(SoakVerdict(minuteSamplesMiB: samples))
        #expect(!verdict.isFlat)
        #expect(verdict.summary.hasSuffix("GREW more than 10 %"))
        let lenient = try #require(SoakVerdict(minuteSamplesMiB: samples, allowedGrowth: 0.2))
        #expect(lenient.isFlat)
        // Shrinking memory is flat.
        #expect(try #require(SoakVerdict(minuteSamplesMiB: [9, 9, 9, 9, 100, 80])).isFlat)
        // Exactly the allowance passes, though 110 / 100 - 1 is a little over 0.1 in floating point.
        #expect(try #require(SoakVerdict(minuteSamplesMiB: [9, 9, 9, 9, 100, 110])).isFlat)
        #expect(try #require(SoakVerdict(minuteSamplesMiB: [9, 9, 9, 9, 100, 110.01])).isFlat == false)
    }

    @Test func theSummarySaysTheChangeAndTheAllowanceAsWritten() throws {
        // A few KiB less than minute 5 rounds to no change, written as such (not "+-0.0").
        let less = try #require(SoakVerdict(minuteSamplesMiB: [9, 9, 9, 9, 100, 99.99]))
        #expect(less.summary.contains("(+0.0 %)"))
        let fractional = try #require(SoakVerdict(minuteSamplesMiB: [9, 9, 9, 9, 100, 102], allowedGrowth: 0.025))
        #expect(fractional.summary.hasSuffix("flat (within 2.5 %)"))
        let shrunk = try #require(SoakVerdict(minuteSamplesMiB: [9, 9, 9, 9, 100, 95]))
        #expect(shrunk.summary.contains("(-5.0 %)"))
    }

    @Test func theVerdictIsWrittenInTheJSONOutput() throws {
        let verdict = try #require(SoakVerdict(minuteSamplesMiB: [9, 9, 9, 9, 100, 120]))
        let object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(verdict)) as? [String: Any]
        #expect(object?["isFlat"] as? Bool == false)
    }

    @Test func aRunTooShortOrASampleThatIsNoSizeGivesNoVerdict() {
        #expect(SoakVerdict(minuteSamplesMiB: []) == nil)
        #expect(SoakVerdict(minuteSamplesMiB: [60, 60, 60, 60, 60]) == nil)
        #expect(SoakVerdict(minuteSamplesMiB: [60, 60, 60, 60, 0, 60]) == nil)
        #expect(SoakVerdict(minuteSamplesMiB: [60, 60, 60, 60, 60, .nan]) == nil)
        #expect(SoakVerdict(minuteSamplesMiB: [60, 60, 60, 60, 60, .infinity]) == nil)
    }
}

import Testing

@testable import Wire

/// Outside text in errors and logs, and durations converted for NIO, at their worst values.
@Suite("Outside text and durations")
struct OutsideTextTests {
    @Test func controlAndFormatCharactersBecomeQuestionMarksAndTheLengthIsBounded() {
        let hostile = "a\u{1B}[31mb\u{85}c\u{202E}d\u{200B}e"
        #expect(OutsideText.printable(hostile, limit: 100) == "a?[31mb?c?d?e")
        #expect(OutsideText.printable(String(repeating: "x", count: 10_000), limit: 64).count == 64)
    }

    @Test func onlyThisMachineIsALoopbackHost() {
        for host in ["127.0.0.1", "localhost", "LOCALHOST", "::1", "[::1]"] {
            #expect(OutsideText.isLoopbackHost(host))
        }
        for host in ["127.0.0.1.evil.example", "10.0.0.1", "oauth2.googleapis.com", ""] {
            #expect(!OutsideText.isLoopbackHost(host))
        }
    }

    @Test func aDurationOfAnySizeConvertsToNanosecondsWithoutTrapping() {
        #expect(Duration.seconds(30).clampedNanoseconds == 30_000_000_000)
        #expect(Duration.milliseconds(1).clampedNanoseconds == 1_000_000)
        #expect(Duration.seconds(Int64.max).clampedNanoseconds == .max)
        #expect(Duration.seconds(Int64.min).clampedNanoseconds == .min)
    }
}

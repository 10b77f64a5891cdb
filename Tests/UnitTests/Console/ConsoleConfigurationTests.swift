import Console
import Foundation
import Testing

@Suite("What the console accepts: addresses, tokens, credentials, windows")
struct ConsoleConfigurationTests {
    @Test func anAddressBeyondLoopbackWithoutATokenIsRefusedNamingTheKey() throws {
        for address in ["0.0.0.0", "10.1.2.3", "::", "console.internal", "127.0.0.1.example"] {
            let error = try #require(throws: ConsoleError.self) {
                try ConsoleConfiguration(address: address).validate()
            }
            #expect(error.key == "console.token_file")
            #expect(error.description.contains(address))
        }
        for address in ["127.0.0.1", "127.1.2.3", "localhost", "::1"] {
            try ConsoleConfiguration(address: address).validate()
        }
        try ConsoleConfiguration(address: "0.0.0.0", access: ConsoleAccess(token: "a-token-of-enough-bytes")).validate()
        // Off: nothing to check.
        try ConsoleConfiguration(port: 0, address: "0.0.0.0").validate()
    }

    @Test func aTokenFileThatIsMissingEmptyOrShortIsRefusedWithoutQuotingIt() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("console-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let missing = folder.appendingPathComponent("missing").path
        #expect(throws: ConsoleError.self) { try ConsoleAccess.token(fromFile: missing) }
        for (name, contents) in [
            ("empty", "\n"), ("short", "sh0rt-secret\n"), ("spaced", "two words in a token file\n"),
        ] {
            let path = folder.appendingPathComponent(name).path
            try contents.write(toFile: path, atomically: true, encoding: .utf8)
            let error = try #require(throws: ConsoleError.self) { try ConsoleAccess.token(fromFile: path) }
            #expect(error.key == "console.token_file")
            #expect(
                !error.description.contains(contents.trimmingCharacters(in: .whitespacesAndNewlines)) || name == "empty"
            )
        }
        // A device or a huge file is refused after 1 KB, not read whole at start.
        let endless = try #require(throws: ConsoleError.self) { try ConsoleAccess.token(fromFile: "/dev/zero") }
        #expect(endless.description.contains("more than 1024 bytes"))
        let long = folder.appendingPathComponent("long").path
        try String(repeating: "t", count: 1_025).write(toFile: long, atomically: true, encoding: .utf8)
        #expect(throws: ConsoleError.self) { try ConsoleAccess.token(fromFile: long) }
        let good = folder.appendingPathComponent("good").path
        try "  s3cret-token-for-the-console \n".write(toFile: good, atomically: true, encoding: .utf8)
        #expect(try ConsoleAccess.token(fromFile: good) == "s3cret-token-for-the-console")
    }

    @Test func theTokenIsTakenAsBearerOrAsTheBasicPasswordOnly() {
        let access = ConsoleAccess(token: "the-right-token-123")
        #expect(access.allows(authorization: "Bearer the-right-token-123"))
        #expect(access.allows(authorization: "bearer   the-right-token-123"))
        #expect(access.allows(authorization: "Basic " + Data("anyone:the-right-token-123".utf8).base64EncodedString()))
        #expect(access.allows(authorization: "Basic " + Data(":the-right-token-123".utf8).base64EncodedString()))
        #expect(!access.allows(authorization: nil))
        #expect(!access.allows(authorization: ""))
        #expect(!access.allows(authorization: "the-right-token-123"))
        #expect(!access.allows(authorization: "Basic " + Data("the-right-token-123".utf8).base64EncodedString()))
        #expect(!access.allows(authorization: "Basic " + Data("the-right-token-123:x".utf8).base64EncodedString()))
        #expect(!access.allows(authorization: "Basic %%%not-base64"))
        #expect(!access.allows(authorization: "Bearer the-right-token-12"))
        #expect(ConsoleAccess.loopbackOnly.allows(authorization: nil))
    }

    @Test func windowsCountWhatHappenedWithinThemOnly() {
        let start = ContinuousClock.now
        let history = OutcomeHistory(
            interval: .seconds(10), keep: .seconds(3_600), start: nil)
        history.record(.init(outcomes: ["granted": 100], rejections: [:], deadLetters: [:]), at: start)
        history.record(
            .init(outcomes: ["granted": 160, "rejected": 2], rejections: ["user_mismatch": 2], deadLetters: [:]),
            at: start + .seconds(3_000))
        let now = start + .seconds(3_540)
        let current = OutcomeHistory.Counts(
            outcomes: ["granted": 190, "rejected": 2, "malformed": 1], rejections: ["user_mismatch": 2],
            deadLetters: ["malformed_message": 1])
        let hour = history.window(minutes: 60, current: current, at: now)
        #expect(hour.outcomes == ["granted": 90, "rejected": 2, "malformed": 1])
        #expect(hour.coveredSeconds == 3_540)
        let five = history.window(minutes: 5, current: current, at: now)
        // The oldest sample within 5 minutes is 9 minutes old: none; the newest before is taken, and says so.
        #expect(five.outcomes == ["granted": 30, "malformed": 1])
        #expect(five.rejections == [:])
        #expect(five.deadLetters == ["malformed_message": 1])
        #expect(five.coveredSeconds == 540)
        #expect(abs(five.perSecond - 31.0 / 540) < 1e-9)
    }

    @Test func historyKeepsAtMostItsHour() {
        let history = OutcomeHistory(interval: .seconds(10), keep: .seconds(60))
        let start = ContinuousClock.now
        for step in 0..<1_000 {
            history.record(
                .init(outcomes: ["granted": step], rejections: [:], deadLetters: [:]), at: start + .seconds(10 * step))
        }
        let window = history.window(
            minutes: 60, current: .init(outcomes: ["granted": 1_000], rejections: [:], deadLetters: [:]),
            at: start + .seconds(10_000))
        // Only the last 8 samples are kept: the window covers what they cover.
        #expect(window.coveredSeconds <= 80)
    }
}

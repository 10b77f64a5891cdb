import Foundation
import Sandbox
import Testing

/// CPU time read from a `stat` file: the fields after the command name, whatever the name holds; values no kernel
/// writes read as unreadable.
@Suite("CPU time from /proc")
struct ProcStatTests {
    static func stat(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("stat-\(UUID().uuidString)").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static let ticks = Int64(sysconf(Int32(_SC_CLK_TCK)))

    @Test func userAndSystemTimeAreFields14And15AfterANameWithSpacesAndParentheses() throws {
        let path = try Self.stat("42 (rdk:broker1) (x) y) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0\n")
        #expect(ProcStat.cpuTime(statFile: path) == .milliseconds(300 * 1000 / Self.ticks))
    }

    @Test func aFileItCannotReadIsNil() throws {
        #expect(ProcStat.cpuTime(statFile: "/nonexistent/stat") == nil)
        #expect(ProcStat.cpuTime(statFile: try Self.stat("42 (short) S 1 2 3")) == nil)
        #expect(ProcStat.cpuTime(statFile: try Self.stat("no parenthesis 1 2 3 4 5 6 7 8 9 10 11 12 13")) == nil)
        #expect(ProcStat.cpuTime(statFile: try Self.stat("42 (n) S 1 1 1 0 -1 0 0 0 0 0 x 5 0")) == nil)
        #expect(ProcStat.cpuTime(statFile: try Self.stat("42 (n) S 1 1 1 0 -1 0 0 0 0 0 -5 5 0")) == nil)
        let huge = "42 (n) S 1 1 1 0 -1 0 0 0 0 0 \(Int64.max) \(Int64.max) 0"
        #expect(ProcStat.cpuTime(statFile: try Self.stat(huge)) == nil)
        let large = "42 (n) S 1 1 1 0 -1 0 0 0 0 0 \(Int64.max / 100) 0 0"
        #expect(ProcStat.cpuTime(statFile: try Self.stat(large)) == nil)
    }

    @Test func thisProcessHasSpentSomeTime() throws {
        let spent = try #require(ProcStat.cpuTime(statFile: "/proc/self/stat"))
        #expect(spent >= .zero)
    }
}

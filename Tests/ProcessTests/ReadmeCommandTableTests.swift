import Foundation
import IAPTestSupport
import Testing

@testable import SystemTestSupport

/// README's command table names every command the executable has, and the flags of the support commands as their
/// `--help` knows them: the documentation a support agent reads cannot drift from the binary.
@Suite("README command table")
struct ReadmeCommandTableTests {
    static let root = TestRepository.root

    static func help(_ arguments: [String], executable: String = ChildProcess.executable) throws -> String {
        try OutsideTools.run(executable, arguments + ["--help"]).output
    }

    /// The subcommands `executable --help` lists.
    static func commands(of executable: String) throws -> [String] {
        let help = try Self.help([], executable: executable)
        let section = try #require(help.components(separatedBy: "SUBCOMMANDS:").last)
        return section.split(separator: "\n").compactMap { line -> String? in
            let word = line.trimmingCharacters(in: .whitespaces).split(separator: " ").first.map(String.init)
            // A command's line starts two spaces in; its description's further lines much deeper.
            guard let word, word.first?.isLowercase == true, line.hasPrefix("  "), !line.hasPrefix("   ") else {
                return nil
            }
            return word
        }.filter { $0 != "help" }
    }

    /// The commands of README's rows for `name` (`| `name command …` |`).
    static func rows(of name: String, in readme: String) -> Set<String> {
        Set(
            readme.split(separator: "\n").compactMap { line -> String? in
                guard line.hasPrefix("| `\(name) ") else { return nil }
                return line.dropFirst("| `\(name) ".count).split(whereSeparator: { " `[".contains($0) }).first
                    .map(String.init)
            })
    }

    /// The operator's executable and the development tools' each have a row per command, and no row names a command
    /// the executable lacks (the tools moved to iap-dev must not linger under iap-worker).
    @Test(arguments: [("iap-worker", ChildProcess.executable), ("iap-dev", ChildProcess.devExecutable)])
    func everyCommandHasARowAndEveryRowACommand(name: String, executable: String) throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let commands = try Self.commands(of: executable)
        #expect(!commands.isEmpty)
        for command in commands {
            #expect(readme.contains("| `\(name) \(command)"), "README has no row for \(name) \(command)")
        }
        for row in Self.rows(of: name, in: readme) {
            #expect(commands.contains(row), "README's row `\(name) \(row)` names no command of \(name)")
        }
    }

    @Test func theToolsAreNotTheOperatorsCommands() throws {
        let worker = try Self.commands(of: ChildProcess.executable)
        let dev = try Self.commands(of: ChildProcess.devExecutable)
        #expect(worker.contains("find") && worker.contains("events"))
        for tool in ["demo", "bench", "dev-kafka", "gamebase-sim", "app-store-sim", "google-play-sim"] {
            #expect(dev.contains(tool))
            #expect(!worker.contains(tool), "iap-worker still has \(tool)")
        }
    }

    @Test(arguments: [
        (
            ["find"],
            ["--user", "--payment-id", "--payment-seq", "--event-id", "--json", "--gamebase", "--limit", "--before"]
        ),
        (
            ["events", "tail"],
            ["--from-beginning", "--since", "--type", "--user", "--payment-seq", "--reason", "--json"]
        ),
    ])
    func theSupportCommandsFlagsAreTheRowsFlags(command: [String], flags: [String]) throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let row = try #require(
            readme.split(separator: "\n").first { $0.hasPrefix("| `iap-worker \(command.joined(separator: " "))") })
        let help = try Self.help(command)
        for flag in flags {
            #expect(row.contains(flag), "README's row lacks \(flag)")
            #expect(help.contains(flag), "iap-worker \(command.joined(separator: " ")) --help lacks \(flag)")
        }
    }
}

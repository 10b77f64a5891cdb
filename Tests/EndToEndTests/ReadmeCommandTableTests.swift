import Foundation
import Testing

/// README's command table names every command the executable has, and the flags of the support commands as their
/// `--help` knows them: the documentation a support agent reads cannot drift from the binary.
@Suite("README command table")
struct ReadmeCommandTableTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func help(_ arguments: [String]) throws -> String {
        try CloudEventsInteropTests.run(ChildProcess.executable, arguments + ["--help"]).output
    }

    @Test func everyCommandHasARow() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let help = try Self.help([])
        let section = try #require(help.components(separatedBy: "SUBCOMMANDS:").last)
        let commands = section.split(separator: "\n").compactMap { line -> String? in
            let word = line.trimmingCharacters(in: .whitespaces).split(separator: " ").first.map(String.init)
            // A command's line starts two spaces in; its description's further lines much deeper.
            guard let word, word.first?.isLowercase == true, line.hasPrefix("  "), !line.hasPrefix("   ") else {
                return nil
            }
            return word
        }
        #expect(commands.contains("find") && commands.contains("events"))
        for command in commands where command != "help" {
            #expect(readme.contains("| `iap-worker \(command)"), "README has no row for iap-worker \(command)")
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

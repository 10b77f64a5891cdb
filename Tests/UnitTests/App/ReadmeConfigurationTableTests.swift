import App
import Foundation
import IAPTestSupport
import Testing

@Suite("README configuration table")
struct ReadmeConfigurationTableTests {
    struct Row: Hashable, CustomStringConvertible {
        var key: String
        var environment: String
        var defaultValue: String
        var description: String { "\(key) \(environment) \(defaultValue)" }
    }

    static func readmeRows() throws -> [Row] {
        let root = TestRepository.root
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let tail = try #require(readme.components(separatedBy: "\n## Configuration\n").dropFirst().first)
        let section = tail.components(separatedBy: "\n## ").first ?? tail
        return section.split(separator: "\n").filter { $0.hasPrefix("| `") }.map { line in
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            return Row(
                key: cells[0].trimmingCharacters(in: ["`"]), environment: cells[1].trimmingCharacters(in: ["`"]),
                defaultValue: cells[2])
        }
    }

    static func codeRows() -> [Row] {
        ConfigurationKey.all.map { key in
            let environment = key.name.hasSuffix("<property>") ? "KAFKA_LIBRDKAFKA_<PROPERTY>" : key.environmentName
            let defaultValue = key.isRequired ? "required" : key.defaultValue.map { "`\($0)`" } ?? "—"
            return Row(key: key.name, environment: environment, defaultValue: defaultValue)
        }
    }

    @Test func everyKeyOfTheCodeIsInTheReadmeWithItsEnvironmentNameAndDefault() throws {
        #expect(try Self.readmeRows() == Self.codeRows())
    }
}

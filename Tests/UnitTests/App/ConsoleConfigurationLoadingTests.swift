import App
import Console
import Foundation
import Testing

@Suite("console.* as loaded: on at loopback by default, beyond it only with a token")
struct ConsoleConfigurationLoadingTests {
    @Test func theConsoleIsOnAtLoopbackByDefaultAndOffWithPortZero() async throws {
        let path = try ConfigurationTests.file(ConfigurationTests.minimal)
        let configuration = try await WorkerConfiguration.load(configFile: path, environment: [:])
        #expect(configuration.console.port == 8081)
        #expect(configuration.console.address == "127.0.0.1")
        #expect(!configuration.console.access.requiresToken)
        let off = try await WorkerConfiguration.load(configFile: path, environment: ["CONSOLE_PORT": "0"])
        #expect(!off.console.isEnabled)
    }

    @Test func anAddressBeyondLoopbackWithoutATokenFileRefusesToStartNamingTheKey() async throws {
        let path = try ConfigurationTests.file(ConfigurationTests.minimal + "\nconsole:\n  address: 0.0.0.0\n")
        let error = await #expect(throws: ConfigurationError.self) {
            try await WorkerConfiguration.load(configFile: path, environment: [:])
        }
        #expect(error?.key == "console.token_file")
        #expect(error?.description.contains("0.0.0.0") == true)
        // Off, nothing is listened on: no token needed.
        _ = try await WorkerConfiguration.load(configFile: path, environment: ["CONSOLE_PORT": "0"])
        // Off, its token file is not even read: `find` and `reprocess` load this configuration where it is not mounted.
        _ = try await WorkerConfiguration.load(
            configFile: path, environment: ["CONSOLE_PORT": "0", "CONSOLE_TOKEN_FILE": "/nonexistent/console-token"])
    }

    @Test func aTokenFileOpensAnyAddressAndABadOneIsRefusedWithoutQuotingIt() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("console-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let tokenFile = folder.appendingPathComponent("token").path
        try "a-long-enough-console-token\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let path = try ConfigurationTests.file(ConfigurationTests.minimal)
        let open = try await WorkerConfiguration.load(
            configFile: path,
            environment: [
                "CONSOLE_ADDRESS": "0.0.0.0", "CONSOLE_TOKEN_FILE": tokenFile, "CONSOLE_ENVIRONMENT": "staging",
            ])
        #expect(open.console.access.requiresToken)
        #expect(open.console.access.allows(authorization: "Bearer a-long-enough-console-token"))
        #expect(open.console.environment == "staging")
        // check-config names the file, never the token.
        let shown = open.displayed.map { "\($0.key)=\($0.value)" }.joined(separator: "\n")
        #expect(shown.contains("console.token_file=\(tokenFile)"))
        #expect(!shown.contains("a-long-enough-console-token"))

        let weak = folder.appendingPathComponent("weak").path
        try "hunter2\n".write(toFile: weak, atomically: true, encoding: .utf8)
        for file in [weak, folder.appendingPathComponent("missing").path] {
            let error = await #expect(throws: ConfigurationError.self) {
                try await WorkerConfiguration.load(
                    configFile: path, environment: ["CONSOLE_ADDRESS": "10.0.0.5", "CONSOLE_TOKEN_FILE": file])
            }
            #expect(error?.key == "console.token_file")
            #expect(error?.description.contains("hunter2") == false)
        }
    }

    @Test(arguments: [
        ("CONSOLE_PORT", "65536", "console.port"), ("CONSOLE_PORT", "web", "console.port"),
        ("CONSOLE_ADDRESS", "http://0.0.0.0/", "console.address"),
        ("CONSOLE_ENVIRONMENT", String(repeating: "p", count: 65), "console.environment"),
    ])
    func consoleValuesThatCannotWorkAreRefusedNamingTheKey(variable: String, value: String, key: String) async throws {
        let path = try ConfigurationTests.file(ConfigurationTests.minimal)
        let error = await #expect(throws: ConfigurationError.self) {
            try await WorkerConfiguration.load(configFile: path, environment: [variable: value])
        }
        #expect(error?.key == key)
    }
}

import Foundation
import IAPTestSupport
import Kafka

/// The programs outside this package that tests run: the repository's scripts, the official CloudEvents SDK (PyPI),
/// a built executable's `--help`.
enum OutsideTools {
    /// The records as the interop script reads them: key, value and headers in base64.
    static func cloudEventsRecords(_ records: [KafkaMessage]) throws -> Data {
        let entries: [[String: Any]] = records.map { record in
            let key: Any = record.key.map { Data($0).base64EncodedString() } ?? NSNull()
            let headers: [[Any]] = record.headers.map { header in
                let value: Any = header.value.map { Data($0).base64EncodedString() } ?? NSNull()
                return [header.name, value]
            }
            return [
                "topic": record.topic, "key": key, "value": Data(record.value).base64EncodedString(),
                "headers": headers,
            ]
        }
        return try JSONSerialization.data(withJSONObject: ["records": entries], options: [.sortedKeys])
    }

    /// Runs `scripts/cloudevents-interop.py` with the python of `scripts/cloudevents-venv.sh` (which installs the
    /// SDK on first use).
    static func readWithCloudEventsSDK(_ file: URL) throws -> (Int32, String) {
        let python = try run(
            "/bin/bash", [TestRepository.root.appendingPathComponent("scripts/cloudevents-venv.sh").path], stderr: false
        ).output
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return try run(
            python, [TestRepository.root.appendingPathComponent("scripts/cloudevents-interop.py").path, file.path])
    }

    static func run(_ executable: String, _ arguments: [String], stderr: Bool = true) throws -> (
        status: Int32, output: String
    ) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = TestRepository.root
        let pipe = Pipe()
        process.standardOutput = pipe
        if stderr { process.standardError = pipe }
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

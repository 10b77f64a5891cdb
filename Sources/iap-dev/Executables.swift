import ArgumentParser
import Foundation

/// The executables the tools start as processes of their own.
enum Executables {
    /// This executable (`iap-dev`): the simulator's process of `bench gamebase-client`.
    static var this: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// The operator's `iap-worker` built beside this one (the same build folder): what the benchmarks run as the worker.
    ///
    /// - Throws: a validation error naming the path when it is not there.
    static func worker(given: String?) throws -> String {
        if let given { return given }
        let path = URL(fileURLWithPath: this).deletingLastPathComponent().appendingPathComponent("iap-worker").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw ValidationError(
                "no iap-worker beside iap-dev at \(path): build both (make release), or name one with --worker"
            )
        }
        return path
    }
}

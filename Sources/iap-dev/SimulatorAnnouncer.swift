import App
import Logging
import ServiceLifecycle
import UnixSignals

/// Prints a simulator's first lines (its base URL first, which the tests and scripts read) once it listens, then waits
/// for shutdown.
struct SimulatorAnnouncer: Service {
    let lines: @Sendable () async -> [String]

    func run() async throws {
        for line in await lines() { print(line) }
        fflushStandardOutput()
        try? await gracefulShutdown()
    }

    /// Serves `simulator` with its announcement until SIGTERM or SIGINT.
    static func serve(
        _ simulator: some Service, logger: Logger, announcing lines: @escaping @Sendable () async -> [String]
    ) async throws {
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: simulator), .init(service: SimulatorAnnouncer(lines: lines))],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}

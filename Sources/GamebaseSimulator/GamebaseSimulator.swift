import Gamebase
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import SimulatorServer

/// The Gamebase server API simulator: an HTTP server that follows the contract's §12 checklist.
///
/// Run it as a `Service` (in a `ServiceGroup`, or `run()` in a task) and read ``port()`` once it listens.
public final class GamebaseSimulator: Service {
    public struct Configuration: Sendable {
        public var host: String
        /// 0 picks a free port.
        public var port: Int
        public var appID: String
        public var secretKey: String

        public init(host: String = "127.0.0.1", port: Int = 0, appID: String, secretKey: String) {
            self.host = host
            self.port = port
            self.appID = appID
            self.secretKey = secretKey
        }
    }

    public let configuration: Configuration
    public let state: SimulatorState
    private let logger: Logger
    private let server: SimulatorServer

    public init(configuration: Configuration, state: SimulatorState, logger: Logger) {
        self.configuration = configuration
        self.state = state
        self.logger = logger
        self.server = SimulatorServer(
            host: configuration.host, port: configuration.port, name: "Gamebase simulator", backlog: 1024)
    }

    /// Serves until the task is cancelled or graceful shutdown is triggered.
    public func run() async throws {
        let responder = SimulatorResponder(appID: configuration.appID, secretKey: configuration.secretKey, state: state)
        try await server.run(logger: logger) { request, context in
            try await responder.respond(to: request, context: context)
        }
    }

    /// The port it listens on; waits until it does.
    public func port() async -> Int { await server.port() }

    /// `http://host:port`, once listening.
    public func baseURL() async -> String { await server.baseURL() }
}

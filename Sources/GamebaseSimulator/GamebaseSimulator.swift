import Gamebase
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

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
    private let listening = Mutex<(port: Int?, waiters: [CheckedContinuation<Int, Never>])>((nil, []))

    public init(configuration: Configuration, state: SimulatorState, logger: Logger) {
        self.configuration = configuration
        self.state = state
        self.logger = logger
    }

    /// Serves until the task is cancelled or graceful shutdown is triggered.
    public func run() async throws {
        let responder = SimulatorResponder(appID: configuration.appID, secretKey: configuration.secretKey, state: state)
        let app = Application(
            responder: CallbackResponder<BasicRequestContext> { request, context in
                try await responder.respond(to: request, context: context)
            },
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port), serverName: nil,
                backlog: 1024, reuseAddress: true),
            onServerRunning: { [self] channel in
                let port = channel.localAddress?.port ?? configuration.port
                let waiters = listening.withLock { state in
                    state.port = port
                    defer { state.waiters = [] }
                    return state.waiters
                }
                for waiter in waiters { waiter.resume(returning: port) }
                logger.info("Gamebase simulator listening", metadata: ["simulator.port": "\(port)"])
            },
            logger: logger
        )
        try await app.run()
    }

    /// The port it listens on; waits until it does.
    public func port() async -> Int {
        await withCheckedContinuation { continuation in
            let port = listening.withLock { state -> Int? in
                if state.port == nil { state.waiters.append(continuation) }
                return state.port
            }
            if let port { continuation.resume(returning: port) }
        }
    }

    /// `http://host:port`, once listening.
    public func baseURL() async -> String {
        "http://\(configuration.host):\(await port())"
    }
}

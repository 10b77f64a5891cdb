import Hummingbird
import Logging
import NIOCore
import Synchronization
import Wire

/// The HTTP server under each of the test rig's simulators (Gamebase, the App Store, Google Play): a Hummingbird
/// application on `host:port` (0 picks a free port) answering through one responder, and the port it got, told to
/// whoever waits for it.
public final class SimulatorServer: Sendable {
    public let host: String
    public let requestedPort: Int
    /// Said in the log line once it listens (`Gamebase simulator`).
    let name: String
    let backlog: Int
    private let listening = Mutex<(port: Int?, waiters: [CheckedContinuation<Int, Never>])>((nil, []))

    public init(host: String, port: Int, name: String, backlog: Int = 256) {
        self.host = host
        self.requestedPort = port
        self.name = name
        self.backlog = backlog
    }

    /// Serves `respond` until the task is cancelled or graceful shutdown is triggered.
    public func run(
        logger: Logger, respond: @escaping @Sendable (Request, BasicRequestContext) async throws -> Response
    ) async throws {
        let app = Application(
            responder: CallbackResponder<BasicRequestContext> { request, context in
                try await respond(request, context)
            },
            configuration: .init(
                address: .hostname(host, port: requestedPort), serverName: nil, backlog: backlog, reuseAddress: true),
            onServerRunning: { [self] channel in
                let port = channel.localAddress?.port ?? requestedPort
                let waiters = listening.withLock { state in
                    state.port = port
                    defer { state.waiters = [] }
                    return state.waiters
                }
                for waiter in waiters { waiter.resume(returning: port) }
                logger.info("\(name) listening", metadata: ["simulator.port": "\(port)"])
            },
            logger: logger)
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
    public func baseURL() async -> String { "http://\(host):\(await port())" }
}

/// The simulators' reading of request bodies: flat JSON objects, each member kept as its JSON text.
public enum SimulatorJSON {
    /// A JSON object's members as their JSON text (strings keep their quotes); `nil` when it is not one.
    public static func members(_ bytes: [UInt8]) -> [String: String]? {
        var members: [String: String] = [:]
        var reader = JSONReader(bytes, maxDepth: 8)
        do {
            try reader.readObject { reader, key throws(JSONReader.Failure) in
                members[key] = String(decoding: try reader.captureValue(), as: UTF8.self)
            }
            try reader.finish()
        } catch {
            return nil
        }
        return members
    }

    /// A JSON string member's value (its text without the quotes; `nil` for anything else or one with escapes).
    public static func string(_ json: String) -> String? {
        guard json.count >= 2, json.hasPrefix("\""), json.hasSuffix("\""), !json.contains("\\") else { return nil }
        return String(json.dropFirst().dropLast())
    }
}

import Engine
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// `/metrics` (Prometheus text), `/healthz` (liveness) and `/readyz` (readiness) on `server.port`.
public final class AdminServer: Service {
    let host: String
    let port: Int
    let metrics: WorkerMetrics
    let health: WorkerHealth
    let logger: Logger
    private let boundPort = Mutex<Int?>(nil)

    public init(host: String = "0.0.0.0", port: Int, metrics: WorkerMetrics, health: WorkerHealth, logger: Logger) {
        self.host = host
        self.port = port
        self.metrics = metrics
        self.health = health
        self.logger = logger
    }

    /// The port actually bound (useful with port 0), once listening.
    public var listeningPort: Int? { boundPort.withLock { $0 } }

    public func run() async throws {
        let router = Router()
        let metrics = metrics
        let health = health
        router.get("/metrics") { _, _ in
            metrics.refresh(from: health)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: metrics.exposition())))
        }
        router.get("/healthz") { _, _ in
            let (ok, detail) = health.live
            return Response(
                status: ok ? .ok : .serviceUnavailable, body: .init(byteBuffer: ByteBuffer(string: detail + "\n")))
        }
        router.get("/readyz") { _, _ in
            let (ok, detail) = health.ready
            return Response(
                status: ok ? .ok : .serviceUnavailable, body: .init(byteBuffer: ByteBuffer(string: detail + "\n")))
        }
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .warning)
        let app = Application(
            router: router, configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { [self] channel in
                let port = channel.localAddress?.port
                boundPort.withLock { $0 = port }
                logger.info("HTTP endpoints listening", metadata: ["http.port": "\(port ?? -1)"])
            }, logger: quiet)
        try await app.run()
    }
}

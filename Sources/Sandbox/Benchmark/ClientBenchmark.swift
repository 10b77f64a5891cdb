import AsyncHTTPClient
import Foundation
import Gamebase
import GamebaseHTTP
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// CPU per Get Payment Transaction call: the worker's Gamebase client against a bare HTTP/1.1 exchange over
/// NIO (kept-alive connections, no pool, no timeouts, no decoding) — the floor any client built on NIO starts
/// from. The simulator runs as a separate `iap-dev gamebase-sim` process, so this process's CPU time is the
/// client's alone.
public enum ClientBenchmark {
    public enum Client: String, CaseIterable, Codable, Sendable {
        /// `GamebaseClient.paymentTransaction`, as the worker calls it.
        case gamebase
        /// async-http-client as the worker would configure it (no redirects, no tracing), its answer read with the
        /// worker's own reader: what the worker's pool is measured against.
        case asyncHTTPClient = "async-http-client"
        /// A request written and its answer collected on a kept-alive NIO channel, nothing more.
        case bare
    }

    public struct Options: Sendable {
        public var simulatorExecutable: String
        public var requests = 40_000
        public var concurrency = 32
        public var runs = 3
        /// The clients measured, in this order in each round.
        public var clients = Client.allCases
        /// The start of the scratch folder's name (the simulator's arguments name it).
        public var folderPrefix = "iap-bench-client-"

        public init(simulatorExecutable: String) {
            self.simulatorExecutable = simulatorExecutable
        }
    }

    public struct Run: Codable, Sendable {
        public var client: Client
        public var requestsPerSecond: Double
        public var cpuMicrosecondsPerRequest: Double
    }

    public struct Result: Codable, Sendable {
        public var requests: Int
        public var concurrency: Int
        public var runs: [Run]
        /// Median CPU µs per request of each client.
        public var medianCPUMicrosecondsPerRequest: [String: Double]

        public var table: String {
            var lines = ["client              requests/s   CPU µs/request"]
            for run in runs {
                lines.append(
                    run.client.rawValue.padding(toLength: 20, withPad: " ", startingAt: 0)
                        + String(format: "%10.0f   %14.1f", run.requestsPerSecond, run.cpuMicrosecondsPerRequest))
            }
            for client in Client.allCases {
                if let median = medianCPUMicrosecondsPerRequest[client.rawValue] {
                    lines.append("median \(client.rawValue): \(String(format: "%.1f", median)) µs of CPU per request")
                }
            }
            return lines.joined(separator: "\n")
        }
    }

    static let appID = "bench-app"
    static let secretKey = "bench-secret"
    static let token = "bench-token"
    static let payment = PaymentTransaction(
        paymentSeq: "2024051310001234", userId: "bench-user", productSeq: 1_000_123, currency: "EUR",
        price: Decimal(string: "2.29"), marketId: "GG", accessToken: token, paymentId: "GPA.1234-5678",
        productType: GamebaseProductType.consumable, gamebaseProductId: "gem_pack_100",
        purchaseTime: "2024-05-13T10:20:30+09:00", payload: "{\"c\":1}", isTestPurchase: false, isConsumable: true)

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs each client `runs` times, alternating, against one simulator process.
    public static func run(_ options: Options, logger: Logger) async throws -> Result {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "\(options.folderPrefix)\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let payments = folder.appendingPathComponent("payments.json")
        try JSONEncoder().encode([payment]).write(to: payments)
        let simulator = try MeasuredProcess(
            executable: options.simulatorExecutable,
            arguments: [
                "gamebase-sim", "--port", "0", "--app-id", appID, "--secret-key", secretKey, "--payments",
                payments.path,
                "--unknown-field-rate", "0",
            ],
            logPath: folder.appendingPathComponent("simulator.log").path)
        defer { simulator.kill9() }
        guard let baseURL = try await simulator.line(startingWith: "http://", within: .seconds(30)) else {
            throw Failure(description: "the simulator did not start:\n\(simulator.logTail())")
        }
        var runs: [Run] = []
        for _ in 0..<options.runs {
            for client in options.clients {
                runs.append(try await measure(client, baseURL: baseURL, options: options, logger: logger))
            }
        }
        var medians: [String: Double] = [:]
        for client in options.clients {
            let values = runs.filter { $0.client == client }.map(\.cpuMicrosecondsPerRequest).sorted()
            medians[client.rawValue] = values[values.count / 2]
        }
        return Result(
            requests: options.requests, concurrency: options.concurrency, runs: runs,
            medianCPUMicrosecondsPerRequest: medians)
    }

    private static func measure(_ client: Client, baseURL: String, options: Options, logger: Logger) async throws -> Run
    {
        let perTask = max(1, options.requests / options.concurrency)
        let requests = perTask * options.concurrency
        let cpuBefore = MeasuredProcess.harnessCPUTime
        let started = ContinuousClock.now
        switch client {
        case .gamebase:
            let gamebase = GamebaseClient(
                configuration: GamebaseConfiguration(
                    baseURL: baseURL, appID: appID, secretKey: Secret(secretKey), maxConnections: options.concurrency),
                logger: logger)
            do {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<options.concurrency {
                        group.addTask {
                            for _ in 0..<perTask {
                                _ = try await gamebase.paymentTransaction(
                                    accessToken: token, transactionID: GamebaseTransactionID())
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            } catch {
                try? await gamebase.shutdown()
                throw error
            }
            try await gamebase.shutdown()
        case .asyncHTTPClient:
            var configuration = HTTPClient.Configuration()
            configuration.redirectConfiguration = .disallow
            configuration.tracing.tracer = nil
            configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = options.concurrency
            let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            let url = "\(baseURL)/tcgb-inapp/v1.3/apps/\(appID)/payment/transaction?accessToken=\(token)"
            do {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<options.concurrency {
                        group.addTask {
                            for _ in 0..<perTask {
                                var request = HTTPClientRequest(url: url)
                                request.headers.add(name: "Content-Type", value: "application/json; charset=UTF-8")
                                request.headers.add(name: "X-Secret-Key", value: secretKey)
                                request.headers.add(name: "X-TCGB-Transaction-Id", value: GamebaseTransactionID().value)
                                let response = try await http.execute(request, timeout: .seconds(10))
                                let body = try await response.body.collect(upTo: 4 << 20)
                                guard try GamebaseClient.readPaymentAnswer(Array(body.readableBytesView)) != nil else {
                                    throw Failure(description: "no payment in the answer")
                                }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            } catch {
                try? await http.shutdown()
                throw error
            }
            try await http.shutdown()
        case .bare:
            let url = URL(string: baseURL)!
            let path = "/tcgb-inapp/v1.3/apps/\(appID)/payment/transaction?accessToken=\(token)"
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<options.concurrency {
                    group.addTask {
                        let exchange = try await BareHTTPExchange.connect(
                            host: url.host ?? "127.0.0.1", port: url.port ?? 80)
                        defer { exchange.close() }
                        for _ in 0..<perTask {
                            let body = try await exchange.get(
                                path,
                                headers: [
                                    ("Content-Type", "application/json; charset=UTF-8"), ("X-Secret-Key", secretKey),
                                    ("X-TCGB-Transaction-Id", GamebaseTransactionID().value),
                                ])
                            guard body.readableBytes > 0 else { throw BareHTTPExchange.Failure.emptyAnswer }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        let seconds = (ContinuousClock.now - started) / .seconds(1)
        let cpu = (MeasuredProcess.harnessCPUTime - cpuBefore) / .microseconds(1)
        return Run(
            client: client, requestsPerSecond: Double(requests) / seconds,
            cpuMicrosecondsPerRequest: cpu / Double(requests))
    }
}

/// One kept-alive HTTP/1.1 connection that runs one request at a time.
private final class BareHTTPExchange: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: `pending` and `body` are touched on the channel's event loop only.
    typealias InboundIn = HTTPClientResponsePart

    enum Failure: Error {
        case emptyAnswer
        case closed
    }

    private var channel: (any Channel)!
    private var pending: EventLoopPromise<ByteBuffer>?
    private var body = ByteBuffer()

    static func connect(host: String, port: Int) async throws -> BareHTTPExchange {
        let exchange = BareHTTPExchange()
        exchange.channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(exchange)
                }
            }
            .connect(host: host, port: port).get()
        return exchange
    }

    func get(_ uri: String, headers: [(String, String)]) async throws -> ByteBuffer {
        let channel = self.channel!
        return try await channel.eventLoop.flatSubmit {
            let promise = channel.eventLoop.makePromise(of: ByteBuffer.self)
            self.pending = promise
            var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: uri)
            head.headers.add(name: "Host", value: "127.0.0.1")
            for (name, value) in headers { head.headers.add(name: name, value: value) }
            channel.write(HTTPClientRequestPart.head(head), promise: nil)
            channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
            return promise.futureResult
        }.get()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            body.clear()
        case .body(var part):
            body.writeBuffer(&part)
        case .end:
            let promise = pending
            pending = nil
            promise?.succeed(body)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        pending?.fail(Failure.closed)
        pending = nil
    }

    func close() {
        channel?.close(promise: nil)
    }
}

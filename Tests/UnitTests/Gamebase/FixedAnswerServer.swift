import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// An HTTP server on a free loopback port that gives every request the same raw answer and records what it
/// was asked: for answers the simulator never gives (redirects, bodies that are not JSON).
final class FixedAnswerServer: Sendable {
    struct Request: Sendable {
        var uri: String
        var headers: [(String, String)]
    }

    private final class Recorder: Sendable {
        let requests = Mutex<[Request]>([])
        let connections = Mutex(0)
        let open = Mutex(0)
    }

    private let channel: any Channel
    private let recorder = Recorder()
    var port: Int { channel.localAddress?.port ?? 0 }
    var requests: [Request] { recorder.requests.withLock { $0 } }
    /// Connections accepted so far.
    var connections: Int { recorder.connections.withLock { $0 } }
    /// Connections accepted and not yet closed.
    var openConnections: Int { recorder.open.withLock { $0 } }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        // @unchecked: `answering` is used on the channel's event loop only.
        private var answering = true
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = ByteBuffer
        let answer: String
        let delay: TimeAmount?
        /// Records a request; false when it must go unanswered.
        let record: @Sendable (Request) -> Bool

        init(answer: String, delay: TimeAmount?, record: @escaping @Sendable (Request) -> Bool) {
            self.answer = answer
            self.delay = delay
            self.record = record
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                answering = record(Request(uri: head.uri, headers: head.headers.map { ($0.name, $0.value) }))
            case .body:
                break
            case .end:
                guard answering else { return }
                let bytes = ByteBuffer(string: answer)
                if let delay {
                    let context = NIOLoopBound(context, eventLoop: context.eventLoop)
                    context.value.eventLoop.scheduleTask(in: delay) {
                        context.value.writeAndFlush(self.wrapOutboundOut(bytes), promise: nil)
                    }
                } else {
                    context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
                }
            }
        }
    }

    /// - Parameters:
    ///   - answer: the whole HTTP answer, status line and headers included.
    ///   - tls: serve HTTPS with this context.
    ///   - unanswered: how many of the first requests get no answer at all.
    ///   - answeredUpTo: requests after this many get no answer at all.
    ///   - delay: how long each answer waits before it is written.
    init(
        answer: String, tls: NIOSSLContext? = nil, unanswered: Int = 0, answeredUpTo: Int = .max,
        delay: TimeAmount? = nil
    ) async throws {
        let recorder = self.recorder
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                recorder.connections.withLock { $0 += 1 }
                recorder.open.withLock { $0 += 1 }
                channel.closeFuture.whenComplete { _ in recorder.open.withLock { $0 -= 1 } }
                return channel.eventLoop.makeCompletedFuture {
                    if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
                    // Only the request decoder: the answer is written as raw bytes.
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder()))
                    try channel.pipeline.syncOperations.addHandler(
                        Handler(answer: answer, delay: delay) { request in
                            recorder.requests.withLock { requests in
                                requests.append(request)
                                return requests.count > unanswered && requests.count <= answeredUpTo
                            }
                        })
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    /// A 200 answer carrying `body` as JSON.
    static func ok(_ body: String) -> String {
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }

    func close() async {
        try? await channel.close()
    }
}

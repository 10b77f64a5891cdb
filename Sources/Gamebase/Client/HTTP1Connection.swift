import NIOCore
import NIOHTTP1

/// One kept-alive HTTP/1.1 connection that carries one request at a time (no pipelining).
///
/// The handler lives on the channel's event loop; `send` may be called from any thread and hops there once.
final class HTTP1Connection: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: every mutable field is read and written on the channel's event loop only.
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    struct Response {
        var status: HTTPResponseStatus
        var body: ByteBuffer
        /// The server keeps the connection open for another request.
        var keepAlive: Bool
    }

    /// The pool's failures: a connection fails its call with `.timeout`, `.tooLarge` or `.closed`.
    typealias Failure = HTTP1ConnectionPool.Failure

    private struct Exchange {
        var promise: EventLoopPromise<Response>
        var timeout: Scheduled<Void>
    }

    private var context: ChannelHandlerContext?
    private var exchange: Exchange?
    private var responseHead: HTTPResponseHead?
    private var responseBody: ByteBuffer?
    private var active = true
    private let maxBodyBytes: Int
    /// Set once the channel exists; used to hop to its event loop.
    var channel: (any Channel)!

    init(maxBodyBytes: Int) {
        self.maxBodyBytes = maxBodyBytes
    }

    /// Whether the connection can take another request (read from any thread: a hint; `send` decides).
    var isActive: Bool { channel?.isActive ?? false }

    /// Writes the request and waits for its whole answer, at most `timeout` (after which the connection closes).
    /// Cancelling the calling task closes the connection, which ends the wait.
    func send(_ head: HTTPRequestHead, body: ByteBuffer?, timeout: TimeAmount) async throws -> Response {
        let eventLoop = channel.eventLoop
        let promise = eventLoop.makePromise(of: Response.self)
        eventLoop.execute { self.start(head, body: body, timeout: timeout, promise: promise) }
        return try await withTaskCancellationHandler {
            try await promise.futureResult.get()
        } onCancel: {
            self.close()
        }
    }

    func close() {
        channel?.close(promise: nil)
    }

    private func start(_ head: HTTPRequestHead, body: ByteBuffer?, timeout: TimeAmount, promise: EventLoopPromise<Response>) {
        // The pool hands a connection to one call at a time; one that is closing takes none.
        guard let context, active, exchange == nil else { return promise.fail(Failure.closed) }
        let scheduled = context.eventLoop.scheduleTask(in: timeout) { [self] in
            self.finish(.failure(Failure.timeout))
            self.context?.close(promise: nil)
        }
        exchange = Exchange(promise: promise, timeout: scheduled)
        responseHead = nil
        responseBody = nil
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if let body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    private func finish(_ result: Result<Response, any Error>) {
        guard let exchange else { return }
        self.exchange = nil
        responseHead = nil
        responseBody = nil
        exchange.timeout.cancel()
        exchange.promise.completeWith(result)
    }

    // MARK: ChannelInboundHandler

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        active = false
        finish(.failure(Failure.closed))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            // An interim (1xx) answer is followed by the real one.
            guard exchange != nil, head.status.code >= 200 else { return }
            responseHead = head
        case .body(var part):
            guard exchange != nil else { return }
            if (responseBody?.readableBytes ?? 0) + part.readableBytes > maxBodyBytes {
                finish(.failure(Failure.tooLarge))
                context.close(promise: nil)
            } else if responseBody == nil {
                responseBody = part
            } else {
                responseBody!.writeBuffer(&part)
            }
        case .end:
            guard exchange != nil, let head = responseHead else { return }
            let body = responseBody ?? ByteBuffer()
            if !head.isKeepAlive { active = false }
            finish(.success(Response(status: head.status, body: body, keepAlive: head.isKeepAlive)))
            if !head.isKeepAlive { context.close(promise: nil) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        active = false
        finish(.failure(Failure.closed))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        active = false
        finish(.failure(error))
        context.close(promise: nil)
    }
}

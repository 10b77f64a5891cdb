import Gamebase
import NIOCore
import NIOHTTP1

/// One kept-alive HTTP/1.1 connection that carries one request at a time (no pipelining): the channel and its
/// handler, both fixed when the connection is made, so the connection may be shared between threads as it is.
final class HTTP1Connection: Sendable {
    struct Response {
        var status: HTTPResponseStatus
        var body: ByteBuffer
        /// The server keeps the connection open for another request.
        var keepAlive: Bool
    }

    /// The pool's failures: a connection fails its call with `.timeout`, `.tooLarge` or `.closed`.
    typealias Failure = HTTP1ConnectionPool.Failure

    let channel: any Channel
    private let handler: HTTP1ExchangeHandler

    init(channel: any Channel, handler: HTTP1ExchangeHandler) {
        self.channel = channel
        self.handler = handler
    }

    /// Whether the connection can take another request (read from any thread: a hint; `send` decides).
    var isActive: Bool { channel.isActive }

    /// Writes the request and waits for its whole answer, until `deadline` at most (then the connection closes).
    /// Cancelling the calling task closes the connection, which ends the wait.
    func send(_ head: HTTPRequestHead, body: ByteBuffer?, deadline: NIODeadline) async throws -> Response {
        let eventLoop = channel.eventLoop
        let handler = self.handler
        // One hop to the event loop and one back: the handler resumes the task from the loop itself, with no promise
        // or future between them (each cost allocations per request).
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                eventLoop.execute {
                    handler.start(head, body: body, deadline: deadline, answer: continuation)
                }
            }
        } onCancel: {
            self.close()
        }
    }

    func close() {
        channel.close(promise: nil)
    }
}

/// The channel handler of an ``HTTP1Connection``: one exchange at a time.
///
/// `@unchecked Sendable` because the connection hands it to the channel's event loop (`eventLoop.execute`); every
/// stored property is read and written on that event loop only — by the channel pipeline's callbacks and by
/// ``start(_:body:deadline:answer:)``, which is only ever called there.
final class HTTP1ExchangeHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart
    typealias Failure = HTTP1ConnectionPool.Failure

    private struct Exchange {
        /// Resumed once, by ``finish(_:)``.
        var answer: CheckedContinuation<HTTP1Connection.Response, any Error>
        var deadline: NIODeadline
    }

    private var context: ChannelHandlerContext?
    private var exchange: Exchange?
    /// The connection's one timer, armed for the deadline of the exchange that armed it and left armed when that
    /// exchange ends: exchanges follow each other with the same timeout, so a timer that fires finds the next one's
    /// later deadline and re-arms for it, instead of each exchange scheduling and cancelling a timer of its own
    /// (a scheduled task, its closure and a heap entry per request).
    private var timer: Scheduled<Void>?
    private var timerDeadline = NIODeadline.distantFuture
    /// Counts the timers armed: a cancelled timer that NIO had already taken to run still runs once, and must
    /// then leave the timer armed after it alone.
    private var timerGeneration: UInt64 = 0
    private var responseHead: HTTPResponseHead?
    private var responseBody: ByteBuffer?
    private var active = true
    private let maxBodyBytes: Int

    init(maxBodyBytes: Int) {
        self.maxBodyBytes = maxBodyBytes
    }

    /// On the channel's event loop only.
    func start(
        _ head: HTTPRequestHead, body: ByteBuffer?, deadline: NIODeadline,
        answer: CheckedContinuation<HTTP1Connection.Response, any Error>
    ) {
        // The pool hands a connection to one call at a time; one that is closing takes none.
        guard let context, active, exchange == nil else { return answer.resume(throwing: Failure.closed) }
        exchange = Exchange(answer: answer, deadline: deadline)
        armTimer(for: deadline, on: context.eventLoop)
        responseHead = nil
        responseBody = nil
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if let body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    private func finish(_ result: Result<HTTP1Connection.Response, any Error>) {
        guard let exchange else { return }
        self.exchange = nil
        responseHead = nil
        responseBody = nil
        exchange.answer.resume(with: result)
    }

    /// Makes sure the timer fires no later than `deadline`.
    private func armTimer(for deadline: NIODeadline, on eventLoop: any EventLoop) {
        if timer != nil, timerDeadline <= deadline { return }
        timer?.cancel()
        timerDeadline = deadline
        timerGeneration &+= 1
        let generation = timerGeneration
        timer = eventLoop.scheduleTask(deadline: deadline) { [self] in self.timerFired(generation) }
    }

    private func timerFired(_ generation: UInt64) {
        guard generation == timerGeneration else { return }
        timer = nil
        timerDeadline = .distantFuture
        guard let exchange, let context else { return }
        if exchange.deadline <= .now() {
            finish(.failure(Failure.timeout))
            context.close(promise: nil)
        } else {
            armTimer(for: exchange.deadline, on: context.eventLoop)
        }
    }

    private func disarmTimer() {
        timerGeneration &+= 1
        timer?.cancel()
        timer = nil
        timerDeadline = .distantFuture
    }

    // MARK: ChannelInboundHandler

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        active = false
        finish(.failure(Failure.closed))
        disarmTimer()
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
            finish(.success(HTTP1Connection.Response(status: head.status, body: body, keepAlive: head.isKeepAlive)))
            if !head.isKeepAlive { context.close(promise: nil) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        active = false
        finish(.failure(Failure.closed))
        disarmTimer()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        active = false
        finish(.failure(error))
        context.close(promise: nil)
    }
}

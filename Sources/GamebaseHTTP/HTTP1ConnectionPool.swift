import DequeModule
import Gamebase
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// HTTP/1.1 to one origin over SwiftNIO, with up to `maxConnections` kept-alive connections, for the Gamebase
/// client's two calls per purchase.
///
/// It replaced async-http-client there: the same two calls cost about 100 µs of CPU each through it, against
/// about 35 µs for a bare exchange over NIO (`iap-dev bench gamebase-client`). It does only what those calls
/// need: no redirects, no proxies, no compression, no streaming. A request waits for a free connection when all are
/// busy, at most its timeout, then has its timeout again for the exchange; cancelling it ends either at once.
final class HTTP1ConnectionPool: Sendable {
    struct Origin: Sendable {
        var tls: Bool
        var host: String
        var port: Int

        /// The `Host` header: the port only when it is not the scheme's default.
        var hostHeader: String {
            let bracketed = host.contains(":") ? "[\(host)]" : host
            return port == (tls ? 443 : 80) ? bracketed : "\(bracketed):\(port)"
        }
    }

    /// Why a call failed in the pool or on its connection (anything else comes from NIO or NIOSSL as it is).
    enum Failure: Error, Equatable, CustomStringConvertible {
        case timeout
        case closed
        case tooLarge
        case tlsUnavailable(String)
        case shutDown

        var description: String {
            switch self {
            case .timeout: "timeout"
            case .closed: "the connection closed before the answer was complete"
            case .tooLarge: "the answer is larger than allowed"
            case .tlsUnavailable(let reason): "TLS is unavailable: \(reason)"
            case .shutDown: "the client is shut down"
            }
        }
    }

    /// What a waiting request is handed: an idle connection, or the right to open one.
    private enum Lease {
        case connection(HTTP1Connection)
        case open
    }

    private struct Idle {
        var connection: HTTP1Connection
        var since: NIODeadline
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Lease, any Error>
    }

    private struct State {
        /// Most recently used last.
        var idle: [Idle] = []
        var open = 0
        /// Requests waiting for a connection, first come first served.
        var waiters = Deque<Waiter>()
        var nextWaiterID: UInt64 = 0
        var shutDown = false

        /// Takes the waiter `id` out of the queue, if it is still there.
        mutating func removeWaiter(_ id: UInt64) -> Waiter? {
            guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return waiters.remove(at: index)
        }
    }

    let origin: Origin
    private let hostHeader: String
    private let maxConnections: Int
    private let connectTimeout: TimeAmount
    private let maxBodyBytes: Int
    private let idleTimeout: TimeAmount
    private let sslContext: Result<NIOSSLContext, Failure>?
    private let state = Mutex(State())

    /// - Parameter idleTimeout: a connection idle for longer is closed rather than reused, so that a request does
    ///   not race a server (or load balancer) closing it; 50 s is below the usual 60 s of load balancers.
    init(
        origin: Origin, maxConnections: Int, connectTimeout: TimeAmount, maxBodyBytes: Int,
        idleTimeout: TimeAmount = .seconds(50),
        tls: TLSConfiguration? = nil
    ) {
        self.origin = origin
        self.hostHeader = origin.hostHeader
        self.idleTimeout = idleTimeout
        self.maxConnections = max(1, maxConnections)
        self.connectTimeout = connectTimeout
        self.maxBodyBytes = maxBodyBytes
        if origin.tls {
            do {
                sslContext = .success(try NIOSSLContext(configuration: tls ?? .makeClientConfiguration()))
            } catch {
                sslContext = .failure(.tlsUnavailable("\(type(of: error))"))
            }
        } else {
            sslContext = nil
        }
    }

    /// Sends one request and returns its whole answer. `timeout` bounds the wait for a free connection (when every
    /// one is busy), then the exchange from when the request is written (a new connection's connect has its own
    /// timeout).
    /// - Throws: ``Failure/timeout`` when the time runs out (waiting or exchanging), `CancellationError` when the
    ///   task is cancelled while it waits, ``Failure/closed`` when it is cancelled during the exchange.
    func execute(_ head: HTTPRequestHead, body: ByteBuffer?, timeout: TimeAmount) async throws
        -> HTTP1Connection.Response
    {
        var head = head
        head.headers.add(name: "Host", value: hostHeader)
        if let body { head.headers.add(name: "Content-Length", value: String(body.readableBytes)) }
        try Task.checkCancellation()
        let connection = try await lease(deadline: .now() + timeout)
        do {
            let response = try await connection.send(head, body: body, deadline: .now() + timeout)
            release(connection, reusable: response.keepAlive)
            return response
        } catch {
            release(connection, reusable: false)
            throw error
        }
    }

    /// Closes idle connections and refuses new requests; requests under way finish first.
    func shutdown() {
        let (idle, waiters) = state.withLock { state in
            state.shutDown = true
            defer {
                state.idle = []
                state.waiters = []
            }
            return (state.idle, state.waiters)
        }
        for entry in idle { entry.connection.close() }
        for waiter in waiters { waiter.continuation.resume(throwing: Failure.shutDown) }
    }

    // MARK: Leasing

    private func lease(deadline: NIODeadline) async throws -> HTTP1Connection {
        var stale: [HTTP1Connection] = []
        defer { for connection in stale { connection.close() } }
        let immediate = try state.withLock { state in try take(&state, stale: &stale) }
        let lease: Lease
        if let immediate { lease = immediate } else { lease = try await wait(until: deadline, stale: &stale) }
        switch lease {
        case .connection(let connection):
            // A lease handed over just as the task was cancelled goes back at once.
            if Task.isCancelled {
                release(connection, reusable: true)
                throw CancellationError()
            }
            return connection
        case .open:
            if Task.isCancelled {
                releasePlace()
                throw CancellationError()
            }
            return try await connect()
        }
    }

    /// Waits in line for a connection or a place, until `deadline`; cancelling the task ends the wait at once.
    private func wait(until deadline: NIODeadline, stale: inout [HTTP1Connection]) async throws -> Lease {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiterID &+= 1
            return state.nextWaiterID
        }
        var staleFound: [HTTP1Connection] = []
        defer { stale += staleFound }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Lease, any Error>) in
                // `take` runs again under the same lock that queues the waiter, so a connection released in between
                // is not missed.
                let now: Result<Lease, any Error>? = state.withLock { state in
                    do {
                        if let lease = try take(&state, stale: &staleFound) { return .success(lease) }
                    } catch {
                        return .failure(error)
                    }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                if let now { return continuation.resume(with: now) }
                // The wait ends at the call's deadline; whoever takes the waiter out of the queue resumes it.
                MultiThreadedEventLoopGroup.singleton.any().scheduleTask(deadline: deadline) { [self] in
                    state.withLock { $0.removeWaiter(id) }?.continuation.resume(throwing: Failure.timeout)
                }
            }
        } onCancel: {
            state.withLock { $0.removeWaiter(id) }?.continuation.resume(throwing: CancellationError())
        }
    }

    /// An idle connection, or a place to open one; nil when every place is taken.
    private func take(_ state: inout State, stale: inout [HTTP1Connection]) throws -> Lease? {
        guard !state.shutDown else { throw Failure.shutDown }
        let now = NIODeadline.now()
        while let entry = state.idle.popLast() {
            if entry.connection.isActive, now - entry.since < idleTimeout { return .connection(entry.connection) }
            stale.append(entry.connection)
            state.open -= 1
        }
        guard state.open < maxConnections else { return nil }
        state.open += 1
        return .open
    }

    /// Returns a connection to the pool, or closes it and passes its place to a waiting request.
    private func release(_ connection: HTTP1Connection, reusable: Bool) {
        let keep = reusable && connection.isActive
        var stale: [HTTP1Connection] = []
        let (waiter, close): (Waiter?, Bool) = state.withLock { state in
            if keep, !state.shutDown {
                if let waiter = state.waiters.popFirst() { return (waiter, false) }
                let now = NIODeadline.now()
                state.idle.append(Idle(connection: connection, since: now))
                // The most recently used connection is taken first, so after a burst the ones at the bottom would
                // never be taken again, nor closed: they are closed here once idle past the timeout, and the pool
                // shrinks back to what the traffic uses.
                let fresh = state.idle.firstIndex { now - $0.since < idleTimeout } ?? state.idle.endIndex
                if fresh > 0 {
                    stale = state.idle[..<fresh].map(\.connection)
                    state.idle.removeFirst(fresh)
                    state.open -= fresh
                }
                return (nil, false)
            }
            // Its place is free: a waiting request may open a new connection in it.
            if !state.shutDown, let waiter = state.waiters.popFirst() { return (waiter, true) }
            state.open -= 1
            return (nil, true)
        }
        for connection in stale { connection.close() }
        if close { connection.close() }
        waiter?.continuation.resume(returning: keep && !close ? .connection(connection) : .open)
    }

    /// Opens a connection in a place already counted in `open`; gives the place back if it fails.
    private func connect() async throws -> HTTP1Connection {
        do {
            let handler = HTTP1ExchangeHandler(maxBodyBytes: maxBodyBytes)
            let sslContext = try self.sslContext?.get()
            let serverHostname = Self.isIPAddress(origin.host) ? nil : origin.host
            let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(connectTimeout)
                .channelOption(.socketOption(.so_keepalive), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let sslContext {
                            try channel.pipeline.syncOperations.addHandler(
                                NIOSSLClientHandler(context: sslContext, serverHostname: serverHostname))
                        }
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(handler)
                    }
                }
                .connect(host: origin.host, port: origin.port).get()
            return HTTP1Connection(channel: channel, handler: handler)
        } catch {
            releasePlace()
            throw error
        }
    }

    private func releasePlace() {
        let waiter: Waiter? = state.withLock { state in
            if !state.shutDown, let waiter = state.waiters.popFirst() { return waiter }
            state.open -= 1
            return nil
        }
        waiter?.continuation.resume(returning: .open)
    }

    private static func isIPAddress(_ host: String) -> Bool {
        host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
    }
}

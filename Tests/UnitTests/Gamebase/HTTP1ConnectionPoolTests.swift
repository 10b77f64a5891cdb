import NIOCore
import NIOHTTP1
import Testing

@testable import Gamebase
@testable import GamebaseHTTP

@Suite("HTTP/1.1 connection pool", .timeLimit(.minutes(1)))
struct HTTP1ConnectionPoolTests {
    private func pool(
        _ server: FixedAnswerServer, maxConnections: Int = 4, maxBodyBytes: Int = 1 << 20,
        idleTimeout: TimeAmount = .seconds(50)
    ) -> HTTP1ConnectionPool {
        HTTP1ConnectionPool(
            origin: .init(tls: false, host: "127.0.0.1", port: server.port), maxConnections: maxConnections,
            connectTimeout: .seconds(5), maxBodyBytes: maxBodyBytes, idleTimeout: idleTimeout)
    }

    private func get(_ pool: HTTP1ConnectionPool) async throws -> HTTP1Connection.Response {
        try await pool.execute(
            HTTPRequestHead(version: .http1_1, method: .GET, uri: "/"), body: nil, timeout: .seconds(5))
    }

    @Test func aConnectionIsKeptAliveAndReused() async throws {
        let server = try await FixedAnswerServer(answer: FixedAnswerServer.ok("{}"))
        let pool = pool(server)
        for _ in 0..<5 { #expect(try await get(pool).status == .ok) }
        pool.shutdown()
        #expect(server.connections == 1)
        await server.close()
    }

    @Test func aConnectionIdleLongerThanTheIdleTimeoutIsReplaced() async throws {
        let server = try await FixedAnswerServer(answer: FixedAnswerServer.ok("{}"))
        let pool = pool(server, idleTimeout: .milliseconds(100))
        _ = try await get(pool)
        try await Task.sleep(for: .milliseconds(300))
        _ = try await get(pool)
        pool.shutdown()
        #expect(server.connections == 2)
        await server.close()
    }

    /// The connection used last is taken first, so after a burst the others would sit idle for good, each a socket
    /// and its buffers; the pool closes them once they are idle past the timeout, while the traffic goes on.
    @Test func connectionsABurstOpenedAreClosedOnceIdlePastTheTimeoutWhileOneKeepsServing() async throws {
        let server = try await FixedAnswerServer(answer: FixedAnswerServer.ok("{}"), delay: .milliseconds(200))
        let pool = pool(server, maxConnections: 6, idleTimeout: .seconds(1))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<6 { group.addTask { _ = try await get(pool) } }
            try await group.waitForAll()
        }
        // Six at once on a quiet machine; a slow one may have let a call reuse a connection.
        let opened = server.connections
        try #require(opened >= 2)
        #expect(server.openConnections == opened)
        // One call after another for three seconds: each takes the connection the one before it gave back.
        let clock = ContinuousClock()
        let end = clock.now + .seconds(3)
        while clock.now < end { _ = try await get(pool) }
        var open = server.openConnections
        for _ in 0..<100 where open > 1 {
            try await Task.sleep(for: .milliseconds(20))
            open = server.openConnections
        }
        #expect(open == 1)
        // A stall of over a second between two calls lets the serving one go stale too, and a new one replaces it.
        #expect(server.connections <= opened + 1)
        pool.shutdown()
        await server.close()
    }

    @Test func anAnswerWithConnectionCloseIsNotReused() async throws {
        let server = try await FixedAnswerServer(
            answer: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
        let pool = pool(server)
        for _ in 0..<3 { #expect(try await get(pool).body == ByteBuffer(string: "{}")) }
        pool.shutdown()
        #expect(server.connections == 3)
        await server.close()
    }

    @Test func callsBeyondMaxConnectionsWaitForAFreeConnectionAndAllFinish() async throws {
        let server = try await FixedAnswerServer(answer: FixedAnswerServer.ok("{}"))
        let pool = pool(server, maxConnections: 2)
        let statuses = try await withThrowingTaskGroup(of: HTTPResponseStatus.self) { group in
            for _ in 0..<40 { group.addTask { try await get(pool).status } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        pool.shutdown()
        #expect(statuses.count == 40)
        #expect(statuses.allSatisfy { $0 == .ok })
        #expect(server.connections <= 2)
        await server.close()
    }

    @Test func aChunkedAnswerIsCollectedWhole() async throws {
        let server = try await FixedAnswerServer(
            answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n")
        let pool = pool(server)
        #expect(try await get(pool).body == ByteBuffer(string: #"{"a":1}"#))
        #expect(try await get(pool).body == ByteBuffer(string: #"{"a":1}"#))
        pool.shutdown()
        #expect(server.connections == 1)
        await server.close()
    }

    @Test func anAnswerLargerThanTheLimitFailsAndItsConnectionIsNotReused() async throws {
        let body = String(repeating: "x", count: 100)
        let server = try await FixedAnswerServer(answer: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n\(body)")
        let pool = pool(server, maxBodyBytes: 64)
        await #expect(throws: HTTP1ConnectionPool.Failure.tooLarge) { try await get(pool) }
        await #expect(throws: HTTP1ConnectionPool.Failure.tooLarge) { try await get(pool) }
        pool.shutdown()
        #expect(server.connections == 2)
        await server.close()
    }

    @Test func shutdownRefusesACallWaitingForAConnectionAndCancellingEndsTheOneUnderWay() async throws {
        let server = try await FixedAnswerServer(answer: FixedAnswerServer.ok("{}"), unanswered: 1)
        let pool = pool(server, maxConnections: 1)
        let underWay = Task {
            try await pool.execute(
                HTTPRequestHead(version: .http1_1, method: .GET, uri: "/"), body: nil, timeout: .seconds(50))
        }
        while server.requests.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        // The only connection is busy: this call waits for it.
        let waiting = Task { try await get(pool) }
        try await Task.sleep(for: .milliseconds(100))
        pool.shutdown()
        await #expect(throws: HTTP1ConnectionPool.Failure.shutDown) { try await waiting.value }
        underWay.cancel()
        await #expect(throws: HTTP1ConnectionPool.Failure.closed) { try await underWay.value }
        #expect(server.requests.count == 1)
        await server.close()
    }

    @Test func aCallWaitingForABusyConnectionEndsAtItsDeadline() async throws {
        let server = try await FixedAnswerServer(answer: FixedAnswerServer.ok("{}"), unanswered: 1)
        let pool = pool(server, maxConnections: 1)
        let underWay = Task {
            try await pool.execute(
                HTTPRequestHead(version: .http1_1, method: .GET, uri: "/"), body: nil, timeout: .seconds(50))
        }
        while server.requests.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        // The only connection is busy for 50 s: the second call's 300 ms cover its wait for one.
        let started = ContinuousClock.now
        await #expect(throws: HTTP1ConnectionPool.Failure.timeout) {
            try await pool.execute(
                HTTPRequestHead(version: .http1_1, method: .GET, uri: "/"), body: nil, timeout: .milliseconds(300))
        }
        #expect(ContinuousClock.now - started < .seconds(5))
        underWay.cancel()
        _ = try? await underWay.value
        // The place given up by the timed-out waiter is not lost: the pool still serves.
        #expect(try await get(pool).status == .ok)
        pool.shutdown()
        await server.close()
    }

    /// One answered call with `firstTimeout`, a pause, then a call the server never answers, with `secondTimeout`:
    /// that call must time out no earlier than its own deadline and well before `within`, on the same connection.
    private func expectSecondCallTimesOutOnTime(
        firstTimeout: TimeAmount, pause: Duration = .zero, secondTimeout: Duration, within: Duration
    ) async throws {
        let server = try await FixedAnswerServer(answer: FixedAnswerServer.ok("{}"), answeredUpTo: 1)
        let pool = pool(server, maxConnections: 1)
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/")
        #expect(try await pool.execute(head, body: nil, timeout: firstTimeout).status == .ok)
        try await Task.sleep(for: pause)
        let started = ContinuousClock.now
        await #expect(throws: HTTP1ConnectionPool.Failure.timeout) {
            try await pool.execute(head, body: nil, timeout: .nanoseconds(Int64(secondTimeout / .nanoseconds(1))))
        }
        let waited = ContinuousClock.now - started
        #expect(
            waited >= secondTimeout - .milliseconds(50), "timed out after \(waited), before its own \(secondTimeout)")
        #expect(waited < within, "timed out after \(waited)")
        #expect(server.connections == 1)
        pool.shutdown()
        await server.close()
    }

    /// The connection's timer is left armed for the first call's deadline: the second call, longer, must still get
    /// its whole time (the timer re-arms), and end at its own deadline.
    @Test func aCallOnAKeptAliveConnectionTimesOutAtItsOwnDeadlineNotTheLastCallsOne() async throws {
        try await expectSecondCallTimesOutOnTime(
            firstTimeout: .seconds(1), secondTimeout: .milliseconds(2500), within: .seconds(6))
    }

    /// A call with a shorter timeout than the one before it on the same connection ends at its own deadline.
    @Test func aShorterTimeoutThanTheLastCallsOnTheSameConnectionIsKept() async throws {
        try await expectSecondCallTimesOutOnTime(
            firstTimeout: .seconds(40), secondTimeout: .milliseconds(300), within: .seconds(5))
    }

    /// The timer left armed by a call fires while the connection is idle; the next call arms one of its own.
    @Test func aCallAfterTheLastCallsTimerFiredIdleStillTimesOut() async throws {
        try await expectSecondCallTimesOutOnTime(
            firstTimeout: .milliseconds(100), pause: .milliseconds(400), secondTimeout: .milliseconds(500),
            within: .seconds(4))
    }

    @Test func cancellingACallThatWaitsForAConnectionEndsItAtOnce() async throws {
        let server = try await FixedAnswerServer(answer: FixedAnswerServer.ok("{}"), unanswered: 1)
        let pool = pool(server, maxConnections: 1)
        let underWay = Task {
            try await pool.execute(
                HTTPRequestHead(version: .http1_1, method: .GET, uri: "/"), body: nil, timeout: .seconds(50))
        }
        while server.requests.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        let waiting = Task {
            try await pool.execute(
                HTTPRequestHead(version: .http1_1, method: .GET, uri: "/"), body: nil, timeout: .seconds(50))
        }
        try await Task.sleep(for: .milliseconds(100))
        let cancelled = ContinuousClock.now
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(ContinuousClock.now - cancelled < .seconds(5), "woken by the cancellation, not by a free connection")
        underWay.cancel()
        _ = try? await underWay.value
        #expect(try await get(pool).status == .ok)
        #expect(server.requests.count == 2, "the cancelled call sent nothing")
        pool.shutdown()
        await server.close()
    }

    @Test func aCallAfterShutdownIsRefused() async throws {
        let server = try await FixedAnswerServer(answer: FixedAnswerServer.ok("{}"))
        let pool = pool(server)
        pool.shutdown()
        await #expect(throws: HTTP1ConnectionPool.Failure.shutDown) { try await get(pool) }
        await server.close()
    }
}

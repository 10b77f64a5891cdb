import Foundation
import Fulfilment
import IAPTestSupport
import Ledger
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Testing

/// Opening a PostgreSQL ledger against the test server, which speaks TLS with a certificate from a test CA
/// (scripts/test-postgres.sh): verified TLS works and is really used; what cannot work is a configuration error at
/// once; what can heal is retried until the task is cancelled.
@Suite("PostgreSQL ledger: TLS and start-up", .timeLimit(.minutes(2)))
struct PostgresLedgerStartupTests {
    static let fastRetry = LedgerConnectRetry(
        maxAttempts: nil, initialBackoff: .milliseconds(50), maxBackoff: .milliseconds(200))

    /// Opens the ledger, migrates it and reads from it, then asks the server whether the store's connections are
    /// encrypted.
    static func openAndCheckEncryption(_ url: String, database: String) async throws -> [Bool] {
        let server = try PostgresTestServer.current()
        return try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { store in
            _ = try await store.countUnconsumed()
            return try await server.encryptionOfConnections(to: database)
        }
    }

    /// Runs `open` and returns its `LedgerError` with the time it took; fails the test if it succeeds.
    static func refusal(_ open: @Sendable () async throws -> Void) async -> (LedgerError?, Duration) {
        let clock = ContinuousClock()
        let start = clock.now
        let error = await #expect(throws: LedgerError.self) { try await open() }
        return (error, start.duration(to: clock.now))
    }

    @Test(arguments: ["127.0.0.1", "localhost"])
    func verifyFullConnectsMigratesAndEncryptsWithTheTestCA(host: String) async throws {
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        let url = server.url(
            database: database, host: host,
            query: "sslmode=verify-full&sslrootcert=\(try PostgresTestServer.certificateAuthority())")
        let encrypted = try await Self.openAndCheckEncryption(url, database: database)
        #expect(!encrypted.isEmpty)
        #expect(encrypted.allSatisfy { $0 }, "the server sees unencrypted connections: \(encrypted)")
    }

    /// After a failover the pool can reach a server that answers reads and refuses every write: the probe must call
    /// that a ledger outage (purchases wait), not a ledger that works (purchases fail and are dead-lettered).
    @Test func aServerThatTakesNoWritesFailsTheProbeAsUnwritable() async throws {
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        let url = server.url(database: database)
        #expect(
            try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) {
                try await $0.countUnconsumed()
            } == 0)
        try await server.withConnection(to: database) { connection in
            _ = try await connection.query(
                PostgresQuery(unsafeSQL: "ALTER DATABASE \(database) SET default_transaction_read_only = on"),
                logger: TestDatabases.quietLogger)
        }
        let error = await #expect(throws: LedgerError.self) {
            try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger, migrate: false) {
                try await $0.countUnconsumed()
            }
        }
        #expect(error?.code == .unwritable, "\(String(describing: error))")
        #expect(error?.message.hasPrefix("read-only (the server takes no writes)") == true)
        // The monitor's probe writes: refused with 25006, a storage condition, not the statement's fault.
        let probeError = await #expect(throws: LedgerError.self) {
            try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger, migrate: false) {
                try await $0.probeWrite()
            }
        }
        #expect(probeError?.code == .unwritable, "\(String(describing: probeError))")
        #expect(probeError?.message.contains("25006") == true)
    }

    @Test func theStoreReportsTheTLSVersionOfItsConnections() async throws {
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        let ca = try PostgresTestServer.certificateAuthority()
        let version = try await LedgerStores.withStore(
            url: server.url(database: database, query: "sslmode=verify-full&sslrootcert=\(ca)"),
            logger: TestDatabases.quietLogger
        ) { store in try await #require(store as? PostgresLedgerStore).tlsVersion() }
        #expect(version?.hasPrefix("TLS") == true)
        let plain = try await LedgerStores.withStore(
            url: server.url(database: database, query: "sslmode=disable"), logger: TestDatabases.quietLogger
        ) { store in try await #require(store as? PostgresLedgerStore).tlsVersion() }
        #expect(plain == nil)
    }

    @Test func requireEncryptsWithoutVerifyingTheCertificate() async throws {
        // The test CA is not among the system's roots: verification would fail, so this proves none happens.
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        let encrypted = try await Self.openAndCheckEncryption(
            server.url(database: database, query: "sslmode=require"), database: database)
        #expect(!encrypted.isEmpty)
        #expect(encrypted.allSatisfy { $0 })
    }

    @Test func aServerWhoseCertificateDoesNotVerifyIsAConfigurationErrorAtOnce() async throws {
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        let untrusted = try PostgresTestServer.untrustedCertificateAuthority()
        let recorder = RecordingLogHandler.Recorder()
        let url = server.url(database: database, query: "sslmode=verify-full&sslrootcert=\(untrusted)")
        let (error, elapsed) = await Self.refusal {
            // Even when told to wait for the database for ever, a refusal is not retried.
            try await LedgerStores.withStore(url: url, logger: recorder.logger(), connectRetry: Self.fastRetry) { _ in }
        }
        #expect(error?.code == .configuration)
        #expect(error?.isRetryable == false)
        #expect(error.map { "\($0)" }?.contains("ledger.url") == true)
        #expect(
            error.map { "\($0)" }?.contains("certificate does not verify") == true, "\(error.map { "\($0)" } ?? "")")
        #expect(elapsed < .seconds(10))
        #expect(recorder.count { $0.level == .error } == 1)
        #expect(recorder.count { $0.level == .warning } == 0, "a refusal must not be retried")
        #expect(!recorder.all.contains { $0.line.contains(server.password) && server.password.count > 3 })
    }

    @Test func aHostNameTheCertificateDoesNotNameIsAConfigurationError() async throws {
        // The certificate names localhost and 127.0.0.1; the test server also listens on 127.0.0.2, which it does
        // not name. The chain verifies (right CA): only the name check can refuse it.
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        let ca = try PostgresTestServer.certificateAuthority()
        let url = server.url(database: database, host: "127.0.0.2", query: "sslmode=verify-full&sslrootcert=\(ca)")
        let (error, _) = await Self.refusal {
            try await LedgerStores.withStore(
                url: url, logger: TestDatabases.quietLogger,
                connectRetry: LedgerConnectRetry(maxAttempts: 3, initialBackoff: .milliseconds(50))
            ) { _ in }
        }
        #expect(error?.code == .configuration, "\(error.map { "\($0)" } ?? "")")
        #expect(error.map { "\($0)" }?.contains("does not name 127.0.0.2") == true, "\(error.map { "\($0)" } ?? "")")
        // …while sslmode=require, which verifies nothing, connects to the same address.
        try await LedgerStores.withStore(
            url: server.url(database: database, host: "127.0.0.2", query: "sslmode=require"),
            logger: TestDatabases.quietLogger
        ) { store in _ = try await store.countUnconsumed() }
    }

    @Test func aWrongPasswordIsAConfigurationErrorThatNeverShowsThePassword() async throws {
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        let recorder = RecordingLogHandler.Recorder()
        let url = server.url(database: database, password: "not-the-Password-42", query: "sslmode=disable")
        let (error, elapsed) = await Self.refusal {
            try await LedgerStores.withStore(url: url, logger: recorder.logger(), connectRetry: Self.fastRetry) { _ in }
        }
        #expect(error?.code == .configuration)
        #expect(error.map { "\($0)" }?.contains("28P01") == true, "\(error.map { "\($0)" } ?? "")")
        #expect(error.map { "\($0)" }?.contains("not-the-Password-42") == false)
        #expect(!recorder.all.contains { $0.line.contains("not-the-Password-42") })
        #expect(recorder.count { $0.level == .error } == 1)
        #expect(elapsed < .seconds(10))
    }

    @Test func anUnknownDatabaseIsAConfigurationError() async throws {
        let server = try PostgresTestServer.current()
        let url = server.url(database: "no_such_ledger_database", query: "sslmode=disable")
        let (error, _) = await Self.refusal {
            try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger, connectRetry: Self.fastRetry)
            { _ in }
        }
        #expect(error?.code == .configuration)
        #expect(error.map { "\($0)" }?.contains("3D000") == true)
    }

    @Test func anUnreadableRootCertificateFileIsAConfigurationErrorBeforeConnecting() async throws {
        let server = try PostgresTestServer.current()
        let url = server.url(
            database: server.database, query: "sslmode=verify-full&sslrootcert=/nonexistent/iap-ca.pem")
        let (error, _) = await Self.refusal {
            try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger, connectRetry: Self.fastRetry)
            { _ in }
        }
        #expect(error?.code == .configuration)
        #expect(error.map { "\($0)" }?.contains("/nonexistent/iap-ca.pem") == true)
        #expect(error.map { "\($0)" }?.contains(server.password) == false || server.password.count <= 3)
    }

    @Test func aServerThatRefusesTLSIsAConfigurationErrorWhenTLSIsRequired() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let refuser = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in channel.pipeline.addHandler(RefuseTLSHandler()) }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { refuser.close(promise: nil) }
        let port = try #require(refuser.localAddress?.port)
        let (error, _) = await Self.refusal {
            try await LedgerStores.withStore(
                url: "postgres://iap:hunter2@127.0.0.1:\(port)/ledger?sslmode=require",
                logger: TestDatabases.quietLogger,
                connectRetry: Self.fastRetry
            ) { _ in }
        }
        #expect(error?.code == .configuration)
        #expect(error.map { "\($0)" }?.contains("does not accept TLS") == true, "\(error.map { "\($0)" } ?? "")")
    }

    @Test func aClosedPortIsRetriedWithAWarningPerAttemptUntilTheTaskIsCancelled() async throws {
        let port = try await Self.closedPort()
        let recorder = RecordingLogHandler.Recorder()
        let opening = Task {
            try await LedgerStores.withStore(
                url: "postgres://iap:hunter2@127.0.0.1:\(port)/ledger", logger: recorder.logger(),
                connectRetry: Self.fastRetry
            ) { _ in }
        }
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(20)
        while recorder.count(where: { $0.level == .warning }) < 3, clock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let warnings = recorder.all.filter { $0.level == .warning }
        #expect(warnings.count >= 3, "the closed port was not retried")
        #expect(warnings.allSatisfy { $0.message == "ledger not reachable yet, retrying" })
        #expect(warnings.map { $0.metadata["ledger.attempt"]?.description }.prefix(3) == ["1", "2", "3"])
        #expect(!recorder.all.contains { $0.line.contains("hunter2") })

        let cancelledAt = clock.now
        opening.cancel()
        let result = await opening.result
        #expect(cancelledAt.duration(to: clock.now) < .seconds(2))
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(recorder.count { $0.level == .error } == 0)
    }

    @Test func aClosedPortTriedOnceIsUnavailableAndRetryable() async throws {
        let port = try await Self.closedPort()
        let (error, _) = await Self.refusal {
            try await LedgerStores.withStore(
                url: "postgres://iap:hunter2@127.0.0.1:\(port)/ledger", logger: TestDatabases.quietLogger,
                connectRetry: LedgerConnectRetry(maxAttempts: 2, initialBackoff: .milliseconds(10))
            ) { _ in }
        }
        #expect(error?.code == .unavailable)
        #expect(error?.isRetryable == true)
        #expect(error.map { "\($0)" }?.contains("2 attempts") == true, "\(error.map { "\($0)" } ?? "")")
    }

    @Test func theWaitBetweenAttemptsDoublesUpToItsCapWithAtMostAQuarterTakenOff() {
        let retry = LedgerConnectRetry.untilConnected
        for (attempt, full) in [
            (1, 500), (2, 1_000), (3, 2_000), (6, 16_000), (7, 30_000), (40, 30_000), (10_000, 30_000),
        ] {
            let wait = retry.backoff(afterAttempt: attempt)
            #expect(wait <= .milliseconds(full) && wait >= .milliseconds(full) * 0.75, "attempt \(attempt): \(wait)")
        }
    }

    /// A loopback port that nothing listens on: bound, read, closed.
    static func closedPort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(channel.localAddress?.port)
        try await channel.close()
        return port
    }

    /// With the default search path, an empty schema named after the role, made after the ledger was built in
    /// `public`, is where new tables would go: a start must refuse rather than migrate a second, empty ledger there and
    /// lose sight of the real grants.
    @Test func aStartRefusesALedgerThatAnEmptySchemaOfTheRoleWouldHide() async throws {
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        let url = server.url(database: database)
        let logger = TestDatabases.quietLogger
        try await LedgerStores.withStore(url: url, logger: logger) { store in
            _ = try await store.insertGrant(
                LedgerStoreTests.grant("live-1", user: "player"),
                event: LedgerStoreTests.event("live-1:item-granted", seq: "live-1"))
        }
        let role = try await server.createRoleSchema(in: database)
        let (error, _) = await Self.refusal {
            try await LedgerStores.withStore(url: url, logger: logger) { _ in }
        }
        #expect(error?.code == .configuration)
        #expect(error?.message.contains("schema public") == true && error?.message.contains("schema \(role)") == true)
        let tablesInRoleSchema = try await server.withConnection(to: database) { connection in
            var count: Int64 = -1
            for try await value in try await connection.query(
                "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = \(role)", logger: logger
            ).decode(Int64.self) {
                count = value
            }
            return count
        }
        #expect(tablesInRoleSchema == 0, "the refused start created tables in the role's schema")
    }

    /// A ledger in the role's schema beside the one in `public` (made there by an older start, before this check
    /// existed): which one holds the grants is the operator's call; the start refuses, naming both.
    @Test func aStartRefusesTwoLedgersOnTheSearchPath() async throws {
        let server = try PostgresTestServer.current()
        let database = try await server.createDatabase()
        let url = server.url(database: database)
        let logger = TestDatabases.quietLogger
        try await LedgerStores.withStore(url: url, logger: logger) { _ in }
        let role = try await server.createRoleSchema(in: database)
        // What an older version's start did there: a ledger of its own, empty.
        try await server.withConnection(to: database) { try await TestDatabases.applyMigrations(first: 4, on: $0) }
        let (error, _) = await Self.refusal {
            try await LedgerStores.withStore(url: url, logger: logger) { _ in }
        }
        #expect(error?.code == .configuration)
        #expect(
            error?.message.contains("\(role) and public") == true
                || error?.message.contains("public and \(role)") == true)
    }
}

/// Answers PostgreSQL's SSLRequest with 'N' (no TLS here), as a server with `ssl=off` does.
private final class RefuseTLSHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: "N")), promise: nil)
    }
}

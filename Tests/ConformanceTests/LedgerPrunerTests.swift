import Foundation
import Fulfilment
import IAPTestSupport
import Ledger
import Logging
import PostgresNIO
import Testing

@testable import Engine

@Suite("Ledger retention: the pruner", .timeLimit(.minutes(5)))
struct LedgerPrunerTests {
    static let now = Date(epochMilliseconds: 1_800_000_000_000)
    static func ago(hours: Double) -> Date { now.addingTimeInterval(-hours * 3_600) }

    /// A pruner over `store` whose clock stands at ``now``.
    static func pruner(
        _ store: any RetentionLedger, _ policy: RetentionPolicy = RetentionPolicy(), metrics: RecordingMetrics
    ) -> LedgerPruner {
        var logger = Logger(label: "pruner.test")
        logger.logLevel = .critical
        return LedgerPruner(
            ledger: store, policy: policy, metrics: metrics, clock: TestClock(now: now), logger: logger)
    }

    static func grant(_ seq: String, at date: Date, published: Date?) -> (GrantRecord, OutboxEvent) {
        let grant = GrantRecord(
            paymentSeq: seq, userId: "user-\(seq)", gamebaseProductId: "gem", purchaseToken: "tok-\(seq)",
            productSeq: 1,
            marketId: "GG", productType: "CONSUMABLE", price: "1", currency: "KRW", paymentId: "GPA.\(seq)",
            isTestPurchase: false, purchaseTime: nil, payload: nil, grantedAt: date, source: nil)
        return (grant, event("\(seq):item-granted", seq: seq, created: date, published: published))
    }

    static func event(_ id: String, seq: String, created: Date, published: Date?, bytes: Int = 200) -> OutboxEvent {
        OutboxEvent(
            id: id, paymentSeq: seq, topic: "t", key: nil, headers: [], payload: Array(repeating: 0x61, count: bytes),
            createdAt: created, publishedAt: published)
    }

    static func rejection(_ seq: String, user: String, reason: ConsumeFailureReason, at date: Date) -> RejectionWrite {
        let id = "\(seq):consume-failed:\(user)"
        return RejectionWrite(
            rejection: RejectionRecord(
                key: RejectionKey(paymentSeq: seq, userId: user, tokenHash: "h-\(user)"), reason: reason.rawValue,
                eventID: id, rejectedAt: date),
            event: event(id, seq: seq, created: date, published: date))
    }

    static func deadLetter(_ seq: String?, reason: ConsumeFailureReason, at date: Date) -> DeadLetterEntry {
        DeadLetterEntry(
            paymentSeq: seq, userId: nil, tokenHash: nil, reason: reason.rawValue, error: "e", attempts: 1,
            deadLetterTopic: "dlq", original: nil, originalTimestampMilliseconds: nil, failedAt: date, valueBytes: 10)
    }

    @Test(arguments: LedgerBackend.allCases)
    func thePrunerRemovesWhatOutlivedItsRetentionAndKeepsEveryGrant(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            // Grants of 100 days ago (event published then, or never) and of now.
            for (seq, at, published) in [
                ("old", Self.ago(hours: 2_400), Self.ago(hours: 2_400)), ("unpublished", Self.ago(hours: 2_400), nil),
                ("new", Self.now, Self.now),
            ] {
                let (grant, event) = Self.grant(seq, at: at, published: published)
                _ = try await store.insertGrant(grant, event: event)
            }
            _ = try await store.insertRejections([
                Self.rejection("c-old", user: "u", reason: .notConsumable, at: Self.ago(hours: 31 * 24)),
                Self.rejection("c-new", user: "u", reason: .testPurchase, at: Self.ago(hours: 29 * 24)),
                Self.rejection("f-old", user: "thief", reason: .userMismatch, at: Self.ago(hours: 25)),
                Self.rejection("f-new", user: "thief", reason: .invalidPurchase, at: Self.ago(hours: 23)),
            ])
            for (seq, user, hours) in [
                ("c-old", "u", 31.0 * 24), ("c-new", "u", 29 * 24), ("f-old", "thief", 25), ("f-new", "thief", 23),
            ] {
                try await store.markPublished(eventID: "\(seq):consume-failed:\(user)", at: Self.ago(hours: hours))
            }
            try await store.recordDeadLetter(
                Self.deadLetter("d-old", reason: .gamebaseUnavailable, at: Self.ago(hours: 31 * 24)))
            try await store.recordDeadLetter(
                Self.deadLetter("d-new", reason: .gamebaseUnavailable, at: Self.ago(hours: 29 * 24)))
            _ = try await store.reconciliationSightings(
                [ReconciliationSighting(paymentSeq: "s-old", userId: "u")], now: Self.ago(hours: 73), record: true)
            _ = try await store.reconciliationSightings(
                [ReconciliationSighting(paymentSeq: "s-new", userId: "u")], now: Self.ago(hours: 71), record: true)

            let metrics = RecordingMetrics()
            let pass = await Self.pruner(store, metrics: metrics).pruneOnce()
            #expect(pass.caughtUp)
            #expect(!pass.failed)
            // "old:item-granted" and the events of the confirmed rejections (29 and 31 days old, beyond 72 hours).
            #expect(pass.pruned[.publishedOutbox] == 3)
            #expect(pass.pruned[.confirmedRejections] == 1)
            #expect(pass.pruned[.unconfirmedRejections] == 1)
            #expect(pass.pruned[.deadLetters] == 1)
            #expect(pass.pruned[.reconcileSightings] == 1)

            for seq in ["old", "unpublished", "new"] { #expect(try await store.grant(paymentSeq: seq) != nil) }
            #expect(try await store.event(id: "old:item-granted") == nil)
            #expect(try await store.event(id: "unpublished:item-granted") != nil)
            #expect(try await store.event(id: "new:item-granted") != nil)
            #expect(try await store.rejections(paymentSeq: "c-old").isEmpty)
            #expect(try await store.rejections(paymentSeq: "c-new").count == 1)
            #expect(try await store.rejections(paymentSeq: "f-old").isEmpty)
            #expect(try await store.rejections(paymentSeq: "f-new").count == 1)
            // The young claims' events are within the outbox retention; the pruned claim's went with it.
            #expect(try await store.event(id: "f-old:consume-failed:thief") == nil)
            #expect(try await store.event(id: "f-new:consume-failed:thief") != nil)
            let sightings = try await store.reconciliationSightings(
                [
                    ReconciliationSighting(paymentSeq: "s-old", userId: "u"),
                    ReconciliationSighting(paymentSeq: "s-new", userId: "u"),
                ],
                now: Self.now, record: false)
            #expect(Set(sightings.keys) == ["s-new"])

            #expect(metrics.values.pruned["rejections"] == 2)
            #expect(metrics.values.pruned["outbox"] == 3)
            // Exact on SQLite and in memory; PostgreSQL's counts are the statistics' estimate.
            if backend != .postgres { #expect(metrics.values.ledgerRows["grants"] == 3) }

            // A second pass finds nothing more.
            let again = await Self.pruner(store, metrics: metrics).pruneOnce()
            #expect(again.total == 0)
            #expect(again.caughtUp)
        }
    }

    @Test(arguments: LedgerBackend.allCases)
    func aFloodOfForgedClaimsAndMalformedRecordsIsHeldToTheCountBound(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            // 3,000 forged claims within the last hour (every one younger than its age limit), a millisecond apart.
            let flood = 3_000
            for start in stride(from: 0, to: flood, by: 500) {
                let writes = (start..<(start + 500)).map { i in
                    Self.rejection(
                        "forged-\(i)", user: "attacker-\(i)", reason: i % 2 == 0 ? .invalidPurchase : .userMismatch,
                        at: Self.ago(hours: 1).addingTimeInterval(Double(i) / 1_000))
                }
                _ = try await store.insertRejections(writes)
                try await store.markPublished(writes.map { PublishedEvent(id: $0.event.id, at: Self.ago(hours: 1)) })
            }
            _ = try await store.insertRejections([
                Self.rejection("genuine", user: "owner", reason: .notConsumable, at: Self.ago(hours: 2))
            ])
            for i in 0..<1_500 {
                try await store.recordDeadLetter(
                    Self.deadLetter(
                        nil, reason: .malformedMessage, at: Self.ago(hours: 1).addingTimeInterval(Double(i) / 1_000)))
            }
            try await store.recordDeadLetter(
                Self.deadLetter("real", reason: .gamebaseUnavailable, at: Self.ago(hours: 2)))

            var policy = RetentionPolicy()
            policy.maxUnconfirmedRows = 1_000
            policy.batchRows = 250
            let pass = await Self.pruner(store, policy, metrics: RecordingMetrics()).pruneOnce()
            #expect(pass.caughtUp)
            #expect(pass.pruned[.unconfirmedRejections] == flood - 1_000)
            #expect(pass.pruned[.malformedDeadLetters] == 500)
            // The newest 1,000 claims are kept; the genuine rejection and dead letter are untouched.
            #expect(try await store.rejections(paymentSeq: "forged-1999").isEmpty)
            #expect(try await store.rejections(paymentSeq: "forged-2000").count == 1)
            #expect(try await store.rejections(paymentSeq: "forged-2999").count == 1)
            #expect(try await store.rejections(paymentSeq: "genuine").count == 1)
            #expect(try await store.event(id: "forged-0:consume-failed:attacker-0") == nil)
            #expect(try await store.event(id: "forged-2999:consume-failed:attacker-2999") != nil)
            let retention = store
            #expect(try await retention.countBoundCutoff(.unconfirmedRejections, keeping: 1_000) == nil)
            #expect(try await retention.countBoundCutoff(.unconfirmedRejections, keeping: 999) != nil)
            #expect(try await retention.countBoundCutoff(.malformedDeadLetters, keeping: 1_000) == nil)
            #expect(try await retention.countBoundCutoff(.deadLetters, keeping: 1_000) != nil)  // 1,000 + "real"
        }
    }

    /// Store notifications that changed nothing go after their retention, refunds never (a pending refund must outlive
    /// any message of its purchase); refused notifications go after theirs and are held to the count bound.
    @Test(arguments: LedgerBackend.allCases)
    func storeNotificationsThatChangedNothingAndRefusedOnesArePrunedAndRefundsKept(backend: LedgerBackend) async throws
    {
        try await TestDatabases.withFreshLedger(backend) { store in
            let events = RefundLedgerTests.events
            func notification(_ id: String, _ kind: StoreNotification.Kind, paymentId: String?, daysAgo: Double)
                -> StoreNotificationRecord
            {
                var record = RefundLedgerTests.notification(id, paymentId: paymentId, kind: kind)
                record.receivedAt = Self.ago(hours: daysAgo * 24)
                return record
            }
            for record in [
                notification("one-time-old", .other, paymentId: "GPA.a", daysAgo: 40),
                notification("one-time-new", .other, paymentId: "GPA.b", daysAgo: 1),
                notification("refund-old", .refund, paymentId: "GPA.never", daysAgo: 400),
                notification("declined-old", .refundDeclined, paymentId: "GPA.c", daysAgo: 400),
                notification("consumption-old", .consumptionRequest, paymentId: "GPA.d", daysAgo: 400),
            ] {
                _ = try await store.record(record, events: events, now: record.receivedAt)
            }
            for i in 0..<1_200 {
                let at = Self.ago(hours: i < 5 ? 40 * 24 : 1).addingTimeInterval(Double(i) / 1_000)
                try await store.recordRefusal(
                    RefusedNotification(
                        bodyHash: "hash-\(i)", store: .google, code: "unverified", detail: "d", bodyBytes: 10,
                        firstReceivedAt: at, lastReceivedAt: at, count: 1))
            }
            // Google's notification of each purchase, 1,100 within the last day: held to the bound too.
            for i in 0..<1_100 {
                _ = try await store.record(
                    notification("one-time-\(i)", .other, paymentId: "GPA.x\(i)", daysAgo: 0.5 - Double(i) / 1e6),
                    events: events, now: Self.now)
            }
            var policy = RetentionPolicy()
            policy.maxUnconfirmedRows = 1_000
            policy.batchRows = 300
            let pass = await Self.pruner(store, policy, metrics: RecordingMetrics()).pruneOnce()
            #expect(pass.caughtUp)
            #expect(pass.pruned[.otherNotifications] == 1 + 101, "the old one, and the oldest beyond the bound")
            #expect(try await store.notification(id: "one-time-new") == nil)
            #expect(try await store.notification(id: "one-time-99") == nil)
            #expect(try await store.notification(id: "one-time-100") != nil)
            #expect(pass.pruned[.refusedNotifications] == 200, "5 by age, the rest of the oldest to the bound")
            #expect(try await store.notification(id: "one-time-old") == nil)
            for kept in ["refund-old", "declined-old", "consumption-old"] {
                #expect(try await store.notification(id: kept) != nil, "\(kept)")
            }
            #expect(try await store.notification(id: "refund-old")?.outcome == .pending)
            let refusals = try await store.refusals(limit: 2_000)
            #expect(refusals.count == 1_000)
            #expect(!refusals.contains { $0.bodyHash == "hash-199" } && refusals.contains { $0.bodyHash == "hash-200" })
            let counts = try await store.rowCounts()
            if backend != .postgres {  // PostgreSQL's counts are the statistics' estimate
                #expect(counts["store_notifications"] == 1_003 && counts["refused_notifications"] == 1_000)
            }
        }
    }

    @Test
    func onPostgreSQLABatchWhileAnotherInstancePrunesDeletesNothingAndSaysSo() async throws {
        let url = try await TestDatabases.freshLedgerURL(.postgres)
        let database = String(url.split(separator: "/").last ?? "")
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { store in
            try await store.recordDeadLetter(
                Self.deadLetter("d", reason: .gamebaseUnavailable, at: Self.ago(hours: 1_000)))
            let retention = store.roles.retention
            let server = try PostgresTestServer.current()
            try await server.withConnection(to: database) { connection in
                // Another instance's batch: its transaction holds the pruning lock.
                try await connection.query("BEGIN", logger: TestDatabases.quietLogger)
                try await connection.query(
                    "SELECT pg_advisory_xact_lock(\(0x1A9_0003))", logger: TestDatabases.quietLogger)
                #expect(try await retention.prune(.deadLetters, before: Self.now, limit: 100) == nil)
                let pass = await Self.pruner(store, metrics: RecordingMetrics()).pruneOnce()
                #expect(pass.leftToAnotherInstance)
                #expect(!pass.caughtUp)
                try await connection.query("COMMIT", logger: TestDatabases.quietLogger)
            }
            #expect(try await retention.prune(.deadLetters, before: Self.now, limit: 100) == 1)
        }
    }

    @Test
    func onPostgreSQLAUserActiveAgainWhileItsDeleteWaitsIsKept() async throws {
        let url = try await TestDatabases.freshLedgerURL(.postgres)
        let database = String(url.split(separator: "/").last ?? "")
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { store in
            let retention = store.roles.retention
            let server = try PostgresTestServer.current()
            let long = Self.ago(hours: 1_000).epochMilliseconds
            try await server.withConnection(to: database) { connection in
                try await connection.query(
                    "INSERT INTO reconcile_users VALUES ('returning', \(long), \(long)), ('gone', \(long), \(long))",
                    logger: TestDatabases.quietLogger)
                // The scan records new activity of one of them and has not committed yet.
                try await connection.query("BEGIN", logger: TestDatabases.quietLogger)
                try await connection.query(
                    "UPDATE reconcile_users SET last_active_ms = \(Self.now.epochMilliseconds) WHERE user_id = 'returning'",
                    logger: TestDatabases.quietLogger)
                let prune = Task { try await retention.prune(.reconcileUsers, before: Self.ago(hours: 72), limit: 100) }
                try await Task.sleep(for: .milliseconds(500))  // the delete picked both and waits for the row lock
                try await connection.query("COMMIT", logger: TestDatabases.quietLogger)
                #expect(try await prune.value == 1)
                let left = try await connection.query(
                    "SELECT user_id FROM reconcile_users", logger: TestDatabases.quietLogger)
                var users: [String] = []
                for try await user in left.decode(String.self) { users.append(user) }
                #expect(users == ["returning"])
            }
        }
    }

    @Test
    func theSQLiteFileGivesTheSpaceOfPrunedRowsBack() async throws {
        let url = try await TestDatabases.freshLedgerURL(.sqlite)
        let path = String(url.dropFirst("sqlite://".count))
        func fileBytes() throws -> Int {
            try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        }
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger, convertsToIncrementalVacuum: true)
        { store in
            for i in 0..<2_000 {
                let (grant, _) = Self.grant("g\(i)", at: Self.ago(hours: 100), published: nil)
                _ = try await store.insertGrant(
                    grant,
                    event: Self.event(
                        "g\(i):item-granted", seq: "g\(i)", created: Self.ago(hours: 100),
                        published: Self.ago(hours: 100),
                        bytes: 8_000))
            }
        }
        let full = try fileBytes()
        #expect(full > 16_000_000)
        let pass = try await LedgerStores.withStore(
            url: url, logger: TestDatabases.quietLogger, convertsToIncrementalVacuum: true
        ) { store in
            await Self.pruner(store, metrics: RecordingMetrics()).pruneOnce()
        }
        #expect(pass.pruned[.publishedOutbox] == 2_000)
        #expect(pass.reclaimedPages > 3_000)
        let after = try fileBytes()
        #expect(after < full / 4, "the file kept \(after) of \(full) bytes")
    }

    @Test
    func aLedgerFileMadeBeforeIncrementalVacuumIsConvertedByTheDaemonsStartOnly() async throws {
        let url = try await TestDatabases.freshLedgerURL(.sqlite)
        let path = String(url.dropFirst("sqlite://".count))
        // A WAL file with a table and auto-vacuum off, as every ledger made before this version.
        let python = "import sqlite3; c = sqlite3.connect('\(path)'); c.execute('PRAGMA journal_mode=WAL')"
        #expect(system("python3 -c \"\(python); c.execute('CREATE TABLE t (x)'); c.commit()\"") == 0)
        let autoVacuum = "python3 -c \"\(python); print(c.execute('PRAGMA auto_vacuum').fetchone()[0])\""
        // A command that looks into a ledger (which a daemon may be using) leaves the file as it is.
        try await LedgerStores.withStore(url: url, logger: TestDatabases.quietLogger) { store in
            let (grant, event) = Self.grant("x", at: Self.now, published: Self.now)
            _ = try await store.insertGrant(grant, event: event)
        }
        #expect(try Self.output(autoVacuum) == "0")
        let logs = RecordingLogHandler.Recorder()
        let logger = logs.logger()
        try await LedgerStores.withStore(url: url, logger: logger, convertsToIncrementalVacuum: true) { store in
            let grant = try await store.grant(paymentSeq: "x")
            #expect(grant != nil)
        }
        #expect(try Self.output(autoVacuum) == "2")
        #expect(logs.count(where: { $0.message.contains("converted") }) == 1)
        // Once: the next start finds it converted.
        try await LedgerStores.withStore(url: url, logger: logger, convertsToIncrementalVacuum: true) { _ in }
        #expect(logs.count(where: { $0.message.contains("converted") }) == 1)
    }

    static func output(_ command: String) throws -> String {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("out-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        guard system("\(command) > \(file)") == 0 else { return "" }
        return try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

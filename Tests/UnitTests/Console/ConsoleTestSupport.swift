import AsyncHTTPClient
import Console
import Dispatch
import Foundation
import Fulfilment
import Gamebase
import KafkaTesting
import Logging
import Lookup
import NIOCore
import NIOHTTP1
import Sandbox
import ServiceLifecycle
import Synchronization
import Testing

/// A ledger read port holding one user's purchase, or one that never answers (a database that stopped talking).
struct FakeReader: HistoryLedger {
    static let seq = "seq-<b>1</b>"
    static let user = "user-\u{202E}evil"
    static let token = "tok-SECRET-purchase-token-1"

    var hangs = false
    /// How many dead letters of one millisecond it holds.
    var deadLetters = 1
    /// Reads started (a hung one counts until it ends).
    var started: ReadCounter? = nil

    private func wait() async {
        started?.add()
        // Ignores cancellation, as a stuck database driver would (answers after a minute, long after any deadline).
        if hangs {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().asyncAfter(deadline: .now() + 60) { done.resume() }
            }
        }
    }

    func history(paymentSeq: String) async throws -> PurchaseHistory {
        await wait()
        guard paymentSeq == Self.seq else { return PurchaseHistory(paymentSeq: paymentSeq) }
        var history = PurchaseHistory(paymentSeq: paymentSeq)
        history.grant = GrantRecord(
            paymentSeq: Self.seq, userId: Self.user, gamebaseProductId: "gems", purchaseToken: Self.token,
            grantedAt: Date(timeIntervalSince1970: 1_790_000_000))
        return history
    }

    func paymentSeqs(paymentId: String, limit: Int) async throws -> [String] {
        await wait()
        return []
    }

    func purchases(userId: String, before cursor: PurchaseCursor?, limit: Int) async throws -> [PurchaseReference] {
        await wait()
        return userId == Self.user ? [PurchaseReference(paymentSeq: Self.seq, firstSeen: Date())] : []
    }

    func deadLetters(original source: MessageSource) async throws -> [DeadLetterEntry] {
        await wait()
        return []
    }

    func deadLetters(reason: String?, before cursor: DeadLetterCursor?, limit: Int) async throws -> [DeadLetterEntry] {
        await wait()
        let now = Date()
        // The latest recorded first, as a ledger pages them.
        return (0..<min(deadLetters, limit)).map { index in
            DeadLetterEntry(
                paymentSeq: Self.seq, userId: Self.user, tokenHash: "abcdef0123456789", reason: "gamebase_unavailable",
                error: "Gamebase did not answer", attempts: 4, deadLetterTopic: "purchase.completed.dlq",
                deadLetterPartition: 0, deadLetterOffset: 7,
                original: MessageSource(topic: "purchase.completed", partition: 2, offset: 41),
                originalTimestampMilliseconds: nil, failedAt: now, valueBytes: 321, ledgerID: Int64(1_000 - index))
        }
    }
}

struct FakeStatus: WorkerStatusSource {
    var outcomes: [String: Int] = ["granted": 3]

    func workerStatus() -> WorkerStatus {
        WorkerStatus(
            version: "test", instance: "test-instance", ready: true, readiness: "ok", live: true, liveness: "ok",
            circuitOpen: false, ledgerReachable: true, stoppedBy: nil, inFlight: 2,
            consumerLag: [.init(topic: "purchase.completed", partition: 0, lag: 5)], unconsumedGrants: 1,
            oldestUnconsumedGrantAgeSeconds: 12, outcomes: outcomes, rejections: ["user_mismatch": 1], deadLetters: [:],
            reconciliationEnabled: true, lastReconcilePass: nil,
            settings: [.init("ledger.url", "postgres://iap:<redacted>@db/iap")], setAsideGrants: 2)
    }
}

final class ReadCounter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// Gamebase that never answers Get Payment Transaction or List Consumables (within a minute), counting the calls.
struct SilentGamebase: GamebaseAPI {
    let calls = ReadCounter()

    private func silence() async {
        calls.add()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().asyncAfter(deadline: .now() + 60) { done.resume() }
        }
    }

    func paymentTransaction(accessToken: String, transactionID: GamebaseTransactionID) async throws(GamebaseError)
        -> PaymentTransaction
    {
        await silence()
        throw GamebaseError(
            code: .timeout, api: "payment_transaction", transactionID: transactionID.value, message: "silent")
    }

    func consume(paymentSeq: String, accessToken: String, transactionID: GamebaseTransactionID)
        async throws(GamebaseError)
        -> ConsumeOutcome
    {
        Issue.record("the console consumed")
        throw GamebaseError(code: .timeout, api: "consume", transactionID: transactionID.value, message: "silent")
    }

    func listConsumables(userId: String, marketIds: [String]?, transactionID: GamebaseTransactionID)
        async throws(GamebaseError) -> [ConsumableItem]
    {
        await silence()
        return []
    }

    func probe(transactionID: GamebaseTransactionID) async -> GamebaseProbeVerdict { .answers }
}

/// A ledger's refunds holding one revoked refund of ``FakeReader``'s purchase and one of a payment never seen, with
/// markup where the store's words go; or one that never answers.
struct FakeRefunds: RefundHistoryLedger {
    static let now = Date()
    var hangs = false

    private func wait() async {
        if hangs {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().asyncAfter(deadline: .now() + 60) { done.resume() }
            }
        }
    }

    static func record(_ id: String, paymentId: String, outcome: NotificationOutcome, seq: String?)
        -> StoreNotificationRecord
    {
        StoreNotificationRecord(
            notification: StoreNotification(
                store: .google, kind: .refund, storeType: "<i>voided</i>", notificationId: id,
                authenticity: .trustedChannel, paymentId: paymentId, purchaseTokenHash: "hash",
                productId: "<script>gems</script>", reason: "REFUND_TYPE_FULL_REFUND", occurredAt: now),
            channel: .googleRTDN, receivedAt: now, outcome: outcome, paymentSeq: seq)
    }

    static let revoked = record("n-<b>revoked</b>", paymentId: "GPA.1", outcome: .revoked, seq: FakeReader.seq)
    static let pending = record("n-pending", paymentId: "GPA.<u>never</u>", outcome: .pending, seq: nil)

    func notifications(paymentKey: StorePaymentKey) async throws -> [StoreNotificationRecord] {
        await wait()
        return [Self.revoked, Self.pending].filter { $0.notification.paymentId == paymentKey.paymentId }
    }
    func notification(id: String) async throws -> StoreNotificationRecord? {
        await wait()
        return [Self.revoked, Self.pending].first { $0.notification.notificationId == id }
    }
    func revocations(paymentSeq: String) async throws -> [RevocationRecord] {
        await wait()
        return []
    }
    func consumptionAnswer(notificationId: String) async throws -> ConsumptionAnswer? {
        await wait()
        return nil
    }
    func latestRefunds(limit: Int) async throws -> [RefundListing] {
        await wait()
        return [
            RefundListing(record: Self.revoked, userId: FakeReader.user),
            RefundListing(record: Self.pending, userId: nil),
        ]
    }
    func refundCounts(since: Date) async throws -> [RefundDayCount] {
        await wait()
        let today = RefundDayCount.day(ofEpochMilliseconds: Self.now.epochMilliseconds)
        return [
            RefundDayCount(day: today, kind: .refund, outcome: .revoked, count: 3),
            RefundDayCount(day: today, kind: .refund, outcome: .pending, count: 1),
            // Older than the page's 30 days: not shown.
            RefundDayCount(day: today.addingTimeInterval(-40 * 86_400), kind: .refund, outcome: .revoked, count: 9),
        ]
    }
    func refundingUsers(since: Date, limit: Int) async throws -> [RefundingUser] {
        await wait()
        return [RefundingUser(userId: FakeReader.user, revocations: 3, reversed: 1, lastRecordedAt: Self.now)]
    }
    func refusals(claimedId: String, limit: Int) async throws -> [RefusedNotification] {
        try await refusals(limit: limit).filter { $0.claimedId == claimedId }
    }
    func refusals(limit: Int) async throws -> [RefusedNotification] {
        await wait()
        return [
            RefusedNotification(
                bodyHash: String(repeating: "ab", count: 32), store: .apple, code: "signed_in_the_future",
                detail: "<b>signed</b> 10 minutes ahead of this clock", bodyBytes: 4_000, firstReceivedAt: Self.now,
                lastReceivedAt: Self.now, count: 3, source: "store.notifications[2]@<i>41</i>"),
            RefusedNotification(
                bodyHash: String(repeating: "cd", count: 32), store: nil, code: "not_json", detail: "not JSON",
                bodyBytes: 3, firstReceivedAt: Self.now, lastReceivedAt: Self.now),
        ]
    }
}

/// A console served on a free loopback port while `body` runs.
func withConsole<T: Sendable>(
    access: ConsoleAccess = .loopbackOnly, reader: FakeReader = FakeReader(), ledgerTimeout: Duration = .seconds(5),
    gamebase: (any GamebaseAPI)? = nil, gamebaseTimeout: Duration = .seconds(20), records: FakeRecords? = nil,
    refunds: FakeRefunds? = FakeRefunds(),
    _ body: @Sendable (_ base: String, _ client: HTTPClient) async throws -> T
) async throws -> T {
    var configuration = ConsoleConfiguration(port: try freeLoopbackPort(), access: access, environment: "production")
    configuration.ledgerReadTimeout = ledgerTimeout
    configuration.gamebaseTimeout = gamebaseTimeout
    configuration.showPayloads = records != nil
    var logger = Logger(label: "console-test")
    logger.logLevel = .critical
    let server = ConsoleServer(
        configuration: configuration, reader: reader, gamebase: gamebase, status: FakeStatus(), records: records,
        refunds: refunds, logger: logger)
    let group = ServiceGroup(services: [server], logger: logger)
    return try await withThrowingTaskGroup(of: T?.self) { tasks in
        tasks.addTask {
            try await group.run()
            return nil
        }
        let started = ContinuousClock.now
        while server.listeningPort == nil {
            guard ContinuousClock.now - started < .seconds(10) else {
                throw ConsoleTestError("the console did not listen")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            let result = try await body("http://127.0.0.1:\(configuration.port)", client)
            try await client.shutdown()
            await group.triggerGracefulShutdown()
            return result
        } catch {
            try? await client.shutdown()
            await group.triggerGracefulShutdown()
            throw error
        }
    }
}

struct ConsoleTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

struct Reply {
    var status: Int
    var headers: [String: String]
    var body: String
}

func request(
    _ client: HTTPClient, _ url: String, method: HTTPMethod = .GET, headers: [(String, String)] = []
) async throws -> Reply {
    var request = HTTPClientRequest(url: url)
    request.method = method
    for (name, value) in headers { request.headers.add(name: name, value: value) }
    let response = try await client.execute(request, timeout: .seconds(30))
    let body = try await response.body.collect(upTo: 4 << 20)
    var fields: [String: String] = [:]
    for header in response.headers { fields[header.name.lowercased()] = header.value }
    return Reply(status: Int(response.status.code), headers: fields, body: String(buffer: body))
}

/// The dead-letter topic as the console reads it: one record at offset 7 of partition 0.
struct FakeRecords: DeadLetterRecordSource {
    var value: [UInt8]
    var topic: String { "purchase.completed.dlq" }

    func value(partition: Int32, offset: Int64) async throws -> [UInt8]? {
        partition == 0 && offset == 7 ? value : nil
    }
}

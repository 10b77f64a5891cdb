import Foundation
import Fulfilment
import Gamebase
import Lookup
import Synchronization

/// What the console's pages are made of: the ledger's read port (every read under a deadline), the worker's status,
/// and Gamebase for "ask Gamebase now". Knows nothing of HTTP; ``ConsoleServer`` serves it.
final class ConsoleSite: Sendable {
    let configuration: ConsoleConfiguration
    let layout: ConsoleLayout
    let finder: PurchaseFinder
    let reader: BoundedHistoryReader
    /// The ledger's refunds, under the reader's bounds; `nil` when the console is given none (the refunds page says so).
    let refunds: BoundedRefundReader?
    let comparer: GamebaseComparer?
    let status: any WorkerStatusSource
    let history: OutcomeHistory
    let records: (any DeadLetterRecordSource)?
    /// One record read from the dead-letter topic at a time, at most four a second (each opens a Kafka reader).
    private let recordReads = ConsoleGate(limit: 1, interval: .milliseconds(250))
    private let recordedCache = Mutex<(at: ContinuousClock.Instant, value: OverviewPage.RecordedDeadLetters)?>(nil)
    /// A read of the overview's dead-letter counts is under way (one at a time, whoever asks).
    private let recordedReading = Mutex(false)
    /// Asks of Gamebase: one at a time, at least ``ConsoleConfiguration/gamebaseAskInterval`` apart (they share the purchase path's client, its
    /// connections and the app's quota at Gamebase).
    private let asking: ConsoleGate

    /// Dead letters read for the overview's counts at most, and how long those counts are kept.
    static let recordedReadLimit = 1_000
    static let recordedCacheLife: Duration = .seconds(10)
    /// For a userId, the most listed payments unknown to the page that an ask looks up.
    static let maxListedAsked = 20
    /// A page's reads together end within this (an id tried as three kinds reads many times).
    static let pageTimeout: Duration = .seconds(10)

    init(
        configuration: ConsoleConfiguration, reader: any HistoryLedger, gamebase: (any GamebaseAPI)?,
        status: any WorkerStatusSource, reconcileGrace: Duration?, history: OutcomeHistory,
        records: (any DeadLetterRecordSource)? = nil, refunds: (any RefundHistoryLedger)? = nil
    ) {
        self.configuration = configuration
        let first = status.workerStatus()
        layout = ConsoleLayout(environment: configuration.environment, instance: first.instance, version: first.version)
        self.reader = BoundedHistoryReader(reader, timeout: configuration.ledgerReadTimeout)
        self.refunds = refunds.map { [reader = self.reader] in BoundedRefundReader(base: $0, bounds: reader) }
        finder = PurchaseFinder(reader: self.reader, refunds: self.refunds, reconcileGrace: reconcileGrace)
        comparer = gamebase.map { GamebaseComparer(gamebase: $0) }
        self.status = status
        self.history = history
        self.records = records
        asking = ConsoleGate(limit: 1, interval: configuration.gamebaseAskInterval)
    }

    static func counts(_ status: WorkerStatus) -> OutcomeHistory.Counts {
        OutcomeHistory.Counts(outcomes: status.outcomes, rejections: status.rejections, deadLetters: status.deadLetters)
    }

    // MARK: Overview

    func overview() async -> ConsoleReply {
        let status = status.workerStatus()
        let now = ContinuousClock.now
        let windows = [5, 60].map { history.window(minutes: $0, current: Self.counts(status), at: now) }
        let page = OverviewPage(
            generatedAt: Date(), environment: configuration.environment, status: status, windows: windows,
            recordedDeadLetters: await recordedDeadLetters())
        return ConsoleReply(html: page.render(layout, refreshSeconds: configuration.refreshSeconds), json: page)
    }

    /// The last day's dead letters by reason, read at most every ``recordedCacheLife`` and by one request at a time
    /// however often the overview is asked (a failed read is kept as long, so a ledger outage is not asked again at
    /// every refresh).
    func recordedDeadLetters() async -> OverviewPage.RecordedDeadLetters {
        let cached = recordedCache.withLock { $0 }
        if let cached, ContinuousClock.now - cached.at < Self.recordedCacheLife { return cached.value }
        let mine = recordedReading.withLock { reading -> Bool in
            defer { reading = true }
            return !reading
        }
        let since = Date().addingTimeInterval(-86_400)
        guard mine else {
            return cached?.value
                ?? OverviewPage.RecordedDeadLetters(
                    since: since, byReason: [:], capped: false, read: 0, error: "being read; reload in a moment")
        }
        defer { recordedReading.withLock { $0 = false } }
        var value = OverviewPage.RecordedDeadLetters(since: since, byReason: [:], capped: false, read: 0)
        do {
            let letters = try await reader.deadLetters(reason: nil, before: nil, limit: Self.recordedReadLimit)
            let recent = letters.filter { $0.failedAt >= since }
            value.read = letters.count
            value.capped = recent.count == Self.recordedReadLimit
            for letter in recent { value.byReason[letter.reason, default: 0] += 1 }
        } catch {
            value.error = Self.describe(error)
        }
        recordedCache.withLock { $0 = (ContinuousClock.now, value) }
        return value
    }

    // MARK: Finding

    /// The longest id taken (as `find`).
    static let maxIdBytes = 1_024

    func find(
        _ id: String?, as kind: IdentifierKind?, before: String?, askGamebase: Bool, path: String, title: String,
        current: String, parameters: [(String, String)]
    ) async -> ConsoleReply {
        guard let id, !id.isEmpty else {
            if path == "/search" {
                let html = layout.page(
                    title: "Search", current: "/search",
                    body: "<p>Type any id <code>iap-worker find</code> takes in the box above: a paymentSeq, a store "
                        + "payment id (Google <code>GPA.…</code>, an Apple transaction id), a userId or an event id.</p>\n"
                )
                return ConsoleReply(html: html, json: ["hint": "give an id as ?q="])
            }
            return problem(400, "give an id")
        }
        guard id.utf8.count <= Self.maxIdBytes else { return problem(400, "an id is at most \(Self.maxIdBytes) bytes") }
        var cursor: PurchaseCursor?
        if let before {
            guard let parsed = CursorText.purchase(before) else {
                return problem(400, "before must be \(CursorText.purchaseForm)")
            }
            cursor = parsed
        }
        do {
            let (finder, cursor) = (finder, cursor)
            var result = try await reader.watchdog.run(Self.pageTimeout, "the page's ledger reads") {
                try await finder.find(id, as: kind, before: cursor, limit: 20)
            }
            if askGamebase { result = await annotate(result) }
            let page = FindPage(result: result, path: path, parameters: parameters)
            return ConsoleReply(
                status: result.purchases.isEmpty ? 404 : 200, html: page.render(layout, title: title, current: current),
                json: page.output)
        } catch {
            return problem(503, "the ledger could not be read: \(Self.describe(error))")
        }
    }

    /// What Gamebase says now, within ``ConsoleConfiguration/gamebaseTimeout``; one ask at a time, a second apart.
    private func annotate(_ result: FindResult) async -> FindResult {
        guard let comparer else { return Self.unasked(result, "Gamebase is not configured for this console") }
        guard asking.enter() else {
            return Self.unasked(result, "another ask of Gamebase is running or just ran; ask again in a moment")
        }
        let reader = reader
        let asking = asking
        do {
            return try await reader.watchdog.run(configuration.gamebaseTimeout, "Gamebase") {
                // Free again when the ask itself ends (past its deadline too): asks never pile up on a slow Gamebase.
                defer { asking.leave() }
                return await comparer.annotate(
                    result, history: { try await reader.history(paymentSeq: $0) }, maxListed: Self.maxListedAsked)
            }
        } catch {
            return Self.unasked(result, "Gamebase could not be asked: \(Self.describe(error))")
        }
    }

    /// The purchases with a note instead of Gamebase's answer.
    static func unasked(_ result: FindResult, _ why: String) -> FindResult {
        var result = result
        for index in result.purchases.indices {
            result.purchases[index].gamebase = GamebaseView(checkedAt: Date(), difference: why, unreachable: true)
        }
        return result
    }

    // MARK: Dead letters

    static let deadLettersPageSize = 50

    func deadLetters(reason: String?, before: String?) async -> ConsoleReply {
        let reason = reason.flatMap { $0.isEmpty ? nil : $0 }
        if let reason, reason.utf8.count > 200 { return problem(400, "a reason is at most 200 bytes") }
        var cursor: DeadLetterCursor?
        if let before {
            guard let parsed = CursorText.deadLetter(before) else {
                return problem(400, "before must be \(CursorText.deadLetterForm)")
            }
            cursor = parsed
        }
        do {
            let (reader, cursor) = (reader, cursor)
            let entries = try await reader.watchdog.run(Self.pageTimeout, "the page's ledger reads") {
                try await reader.deadLetters(reason: reason, before: cursor, limit: Self.deadLettersPageSize)
            }
            let known = await recordedDeadLetters().byReason.keys
            let reasons = Set(known).union(entries.map(\.reason)).union(reason.map { [$0] } ?? []).sorted()
            let page = DeadLettersPage(
                reason: reason, entries: entries, limit: Self.deadLettersPageSize, reasons: reasons,
                recordTopic: configuration.showPayloads ? records?.topic : nil)
            return ConsoleReply(html: page.render(layout), json: page.output)
        } catch {
            return problem(503, "the ledger could not be read: \(Self.describe(error))")
        }
    }

    // MARK: Refunds

    /// The refunds page: each of its four reads on its own, so one the ledger does not answer leaves the others shown.
    func refundsPage(now: Date = Date()) async -> ConsoleReply {
        guard let refunds else { return problem(404, "this console is given no refunds to read") }
        let since = now.addingTimeInterval(-Double(RefundsPage.days) * 86_400)
        var page = RefundsPage(since: since)
        let watchdog = reader.watchdog
        /// One part's read under the page's deadline: its value, or `nil` with why in the page's errors.
        func part<Value: Sendable>(
            _ key: String, _ what: String, _ read: @escaping @Sendable () async throws -> Value
        ) async -> Value? {
            do {
                return try await watchdog.run(Self.pageTimeout, what, read)
            } catch {
                page.errors[key] = Self.describe(error)
                return nil
            }
        }
        page.days = await part("days", "the refund counts") { try await refunds.refundCounts(since: since) }
            .map { RefundsPage.days($0, now: now) }
        page.users = await part("users", "the users with refunds") {
            try await refunds.refundingUsers(since: since, limit: RefundsPage.usersShown)
        }.map(RefundsPage.users)
        page.latest = await part("latest", "the latest refunds") {
            try await refunds.latestRefunds(limit: RefundsPage.latestShown)
        }.map(RefundsPage.refunds)
        page.refused = await part("refused", "the refused notifications") {
            try await refunds.refusals(limit: RefundsPage.refusedShown)
        }.map(RefundsPage.refusals)
        return ConsoleReply(
            status: page.errors.count == 4 ? 503 : 200, html: page.render(layout), json: page.output)
    }

    // MARK: A dead-lettered record

    func record(partition: String?, offset: String?) async -> ConsoleReply {
        guard configuration.showPayloads, let records else {
            return problem(
                404,
                "a record's value is shown only with console.show_payloads: true; the dead letters page gives its size")
        }
        guard let partition = partition.flatMap({ Int32($0) }), partition >= 0,
            let offset = offset.flatMap({ Int64($0) }), offset >= 0
        else { return problem(400, "give the record's partition and offset") }
        guard recordReads.enter() else { return problem(503, "another record is being read; try again in a moment") }
        let reads = recordReads
        let address = "\(records.topic)/\(partition)/\(offset)"
        do {
            // The view is made inside the one-at-a-time read too: parsing and masking a value costs CPU.
            let read = try await reader.watchdog.run(Self.pageTimeout, "reading \(address)") {
                defer { reads.leave() }
                return try await records.value(partition: partition, offset: offset).map {
                    ($0.count, PayloadView.view($0))
                }
            }
            guard let (bytes, view) = read else {
                return problem(
                    404, "\(address) is not in the dead-letter topic (any more: its retention may have removed it)")
            }
            let page = RecordPage(topic: records.topic, partition: partition, offset: offset, bytes: bytes, view: view)
            return ConsoleReply(html: page.render(layout), json: page)
        } catch {
            return problem(503, "the dead-letter topic could not be read: \(Self.describe(error))")
        }
    }

    // MARK: Problems

    func problem(_ status: Int, _ message: String) -> ConsoleReply {
        let title =
            switch status {
            case 400: "Bad request"
            case 404: "Not found"
            case 503: "Unavailable"
            default: "Error"
            }
        let html = layout.page(
            title: title, current: "", body: "<p class=\"notice\" id=\"problem\">\(HTML.escape(message))</p>\n")
        return ConsoleReply(status: status, html: html, json: ConsoleProblem(error: message, status: status))
    }

    /// A refusal before the token was checked: the status and one line, nothing of this instance (no name, version
    /// or environment).
    func refusal(_ status: Int, _ message: String) -> ConsoleReply {
        let html =
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>\(status)</title></head>"
            + "<body><p>\(HTML.escape(message))</p></body></html>\n"
        return ConsoleReply(status: status, html: html, json: ConsoleProblem(error: message, status: status))
    }

    /// An error's own text: the ledger's errors never hold a password or a token; anything else by its type.
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as LedgerError: error.description
        case let error as ConsoleBusy: error.description
        case let error as DeadlineExceeded: error.description
        case let error as GamebaseError: error.description
        default: "\(type(of: error))"
        }
    }
}

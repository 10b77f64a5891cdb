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
    let comparer: GamebaseComparer?
    let status: any ConsoleStatusSource
    let history: OutcomeHistory
    private let recordedCache = Mutex<(at: ContinuousClock.Instant, value: OverviewPage.RecordedDeadLetters)?>(nil)

    /// Dead letters read for the overview's counts at most, and how long those counts are kept.
    static let recordedReadLimit = 1_000
    static let recordedCacheLife: Duration = .seconds(10)

    init(
        configuration: ConsoleConfiguration, reader: any PurchaseHistoryReader, gamebase: (any GamebaseAPI)?,
        status: any ConsoleStatusSource, reconcileGrace: Duration?, history: OutcomeHistory
    ) {
        self.configuration = configuration
        let first = status.consoleStatus()
        layout = ConsoleLayout(environment: configuration.environment, instance: first.instance, version: first.version)
        self.reader = BoundedHistoryReader(reader, timeout: configuration.ledgerReadTimeout)
        finder = PurchaseFinder(reader: self.reader, reconcileGrace: reconcileGrace)
        comparer = gamebase.map { GamebaseComparer(gamebase: $0) }
        self.status = status
        self.history = history
    }

    static func counts(_ status: ConsoleStatus) -> OutcomeHistory.Counts {
        OutcomeHistory.Counts(outcomes: status.outcomes, rejections: status.rejections, deadLetters: status.deadLetters)
    }

    // MARK: Overview

    func overview() async -> ConsoleReply {
        let status = status.consoleStatus()
        let now = ContinuousClock.now
        let windows = [5, 60].map { history.window(minutes: $0, current: Self.counts(status), at: now) }
        let page = OverviewPage(
            generatedAt: Date(), environment: configuration.environment, status: status, windows: windows,
            recordedDeadLetters: await recordedDeadLetters())
        return ConsoleReply(html: page.render(layout, refreshSeconds: configuration.refreshSeconds), json: page)
    }

    /// The last day's dead letters by reason, read at most every ``recordedCacheLife`` however often the overview is
    /// asked (a failed read is kept as long, so a ledger outage is not asked again at every refresh).
    func recordedDeadLetters() async -> OverviewPage.RecordedDeadLetters {
        if let cached = recordedCache.withLock({ $0 }), ContinuousClock.now - cached.at < Self.recordedCacheLife {
            return cached.value
        }
        let since = Date().addingTimeInterval(-86_400)
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
                return ConsoleReply(html: html, json: ConsoleProblem(error: "give an id as ?q=", status: 400))
            }
            return problem(400, "give an id")
        }
        guard id.utf8.count <= Self.maxIdBytes else { return problem(400, "an id is at most \(Self.maxIdBytes) bytes") }
        var beforeDate: Date?
        if let before {
            guard let date = RFC3339.date(before) else { return problem(400, "before must be an RFC 3339 time") }
            beforeDate = date
        }
        do {
            var result = try await finder.find(id, as: kind, before: beforeDate, limit: 20)
            if askGamebase { result = await annotate(result) }
            let page = FindPage(result: result, path: path, parameters: parameters)
            return ConsoleReply(
                status: result.purchases.isEmpty ? 404 : 200, html: page.render(layout, title: title, current: current),
                json: page.output)
        } catch {
            return problem(503, "the ledger could not be read: \(Self.describe(error))")
        }
    }

    /// What Gamebase says now, within ``ConsoleConfiguration/gamebaseTimeout``.
    private func annotate(_ result: FindResult) async -> FindResult {
        guard let comparer else {
            var result = result
            for index in result.purchases.indices {
                result.purchases[index].gamebase = GamebaseView(
                    checkedAt: Date(), difference: "Gamebase is not configured for this console", unreachable: true)
            }
            return result
        }
        let reader = reader
        do {
            return try await reader.watchdog.run(configuration.gamebaseTimeout, "Gamebase") {
                await comparer.annotate(result) { try await reader.history(paymentSeq: $0) }
            }
        } catch {
            var result = result
            for index in result.purchases.indices {
                result.purchases[index].gamebase = GamebaseView(
                    checkedAt: Date(), difference: "Gamebase could not be asked: \(Self.describe(error))",
                    unreachable: true)
            }
            return result
        }
    }

    // MARK: Dead letters

    static let deadLettersPageSize = 50

    func deadLetters(reason: String?, before: String?) async -> ConsoleReply {
        let reason = reason.flatMap { $0.isEmpty ? nil : $0 }
        if let reason, reason.utf8.count > 200 { return problem(400, "a reason is at most 200 bytes") }
        var beforeDate: Date?
        if let before {
            guard let date = RFC3339.date(before) else { return problem(400, "before must be an RFC 3339 time") }
            beforeDate = date
        }
        do {
            let entries = try await reader.deadLetters(
                reason: reason, before: beforeDate, limit: Self.deadLettersPageSize)
            let known = await recordedDeadLetters().byReason.keys
            let reasons = Set(known).union(entries.map(\.reason)).union(reason.map { [$0] } ?? []).sorted()
            let page = DeadLettersPage(
                reason: reason, entries: entries, limit: Self.deadLettersPageSize, reasons: reasons)
            return ConsoleReply(html: page.render(layout), json: page.output)
        } catch {
            return problem(503, "the ledger could not be read: \(Self.describe(error))")
        }
    }

    // MARK: Problems

    func problem(_ status: Int, _ message: String) -> ConsoleReply {
        let title =
            switch status {
            case 400: "Bad request"
            case 401: "Unauthorized"
            case 403: "Forbidden"
            case 404: "Not found"
            case 405: "Method not allowed"
            case 503: "Unavailable"
            default: "Error"
            }
        let html = layout.page(
            title: title, current: "", body: "<p class=\"notice\" id=\"problem\">\(HTML.escape(message))</p>\n")
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

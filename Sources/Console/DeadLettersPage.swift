import Foundation
import Fulfilment
import Lookup
import Wire

/// The dead letters the ledger recorded, newest first, of one reason or all, each linked to its purchase's timeline,
/// with the `iap-worker reprocess` commands that re-drive them.
struct DeadLettersPage: Sendable {
    struct Letter: Encodable, Sendable {
        var failedAt: Date
        var reason: String
        var error: String
        var attempts: Int
        var paymentSeq: String?
        var userId: String?
        /// The short hash of the claimed token (never the token).
        var tokenHash: String?
        /// Where the purchase message was read: `topic/partition/offset`.
        var original: String?
        /// Where the dead-letter record went.
        var deadLetterRecord: String
        var valueBytes: Int
        var valueOmitted: Bool
        var reprocessOutcome: String?
        var reprocessedAt: Date?
        /// The console's page of its purchase.
        var timeline: String?
        var reprocessCommand: String
    }

    struct Output: Encodable, Sendable {
        var reason: String?
        var letters: [Letter]
        /// The `before=` of the next page: `<time>/<id>` (``CursorText``).
        var nextBefore: String?
    }

    var reason: String?
    var letters: [Letter]
    var nextBefore: DeadLetterCursor?
    /// Reasons seen on this page and the overview, for the filter links.
    var reasons: [String]
    /// The records' partition and offset, for the links to their values (`console.show_payloads`): only of records
    /// in the dead-letter topic the console reads (a record of a former dead-letter topic is no record of this one).
    private var addresses: [(partition: Int32, offset: Int64)?]

    /// - Parameter recordTopic: with `console.show_payloads`, the dead-letter topic whose records link to their value.
    init(reason: String?, entries: [DeadLetterEntry], limit: Int, reasons: [String], recordTopic: String? = nil) {
        self.reason = reason
        self.reasons = reasons
        addresses = entries.map { entry in
            guard entry.deadLetterTopic == recordTopic, !entry.valueOmitted, let partition = entry.deadLetterPartition,
                let offset = entry.deadLetterOffset
            else { return nil }
            return (partition, offset)
        }
        nextBefore = entries.count == limit ? entries.last?.cursor : nil
        letters = entries.map { entry in
            let original = entry.original.map { "\($0.topic)/\($0.partition)/\($0.offset)" }
            var timeline: String?
            if let seq = entry.paymentSeq {
                timeline = HTML.url("/purchase", [("seq", seq)])
            } else if let original {
                timeline = HTML.url("/search", [("q", original + ":consume-failed")])
            }
            let record =
                "\(entry.deadLetterTopic)/\(entry.deadLetterPartition.map(String.init) ?? "?")/"
                + "\(entry.deadLetterOffset.map(String.init) ?? "?")"
            return Letter(
                failedAt: entry.failedAt, reason: entry.reason, error: entry.error, attempts: entry.attempts,
                paymentSeq: entry.paymentSeq, userId: entry.userId,
                tokenHash: entry.tokenHash.map(PurchaseTimeline.shortHash), original: original,
                deadLetterRecord: record, valueBytes: entry.valueBytes, valueOmitted: entry.valueOmitted,
                reprocessOutcome: entry.reprocessOutcome, reprocessedAt: entry.reprocessedAt, timeline: timeline,
                reprocessCommand: Self.command(reason: entry.reason))
        }
    }

    var output: Output { Output(reason: reason, letters: letters, nextBefore: nextBefore.map(CursorText.string)) }

    /// `reprocess` re-drives every record of a reason, idempotently (a granted purchase stays granted once).
    static func command(reason: String) -> String {
        "iap-worker reprocess --reason \(FindTextRenderer.shellWord(reason))"
    }

    func render(_ layout: ConsoleLayout) -> String {
        var html = "<p>Filter: <a href=\"/dead-letters\">all reasons</a>"
        for reason in reasons {
            html += " · <a href=\"\(HTML.link("/dead-letters", [("reason", reason)]))\">\(HTML.escape(reason))</a>"
        }
        html += "</p>\n"
        if let reason {
            html +=
                "<p>To re-drive the records of this reason (idempotent: a granted purchase is never granted twice), "
                + "on a host with the worker's configuration:</p>\n<pre id=\"reprocess\">\(HTML.escape(Self.command(reason: reason))) --dry-run\n"
                + "\(HTML.escape(Self.command(reason: reason)))</pre>\n"
        }
        guard !letters.isEmpty else {
            return layout.page(
                title: "Dead letters", current: "/dead-letters",
                body: html
                    + "<p class=\"muted\" id=\"letters\">No dead letter recorded\(reason == nil ? "" : " for this reason").</p>\n"
            )
        }
        html +=
            "<table id=\"letters\"><thead><tr><th>failed at (UTC)</th><th>reason</th><th>purchase</th><th>error</th>"
            + "<th class=\"num\">attempts</th><th>record</th><th>reprocess</th></tr></thead><tbody>\n"
        for (letter, address) in zip(letters, addresses) {
            let purchase: String
            if let timeline = letter.timeline {
                let label = letter.paymentSeq ?? "malformed \(letter.original ?? "")"
                purchase = "<a class=\"mono\" href=\"\(HTML.escape(timeline))\">\(HTML.escape(label))</a>"
            } else {
                purchase = "<span class=\"muted\">unknown</span>"
            }
            let size =
                letter.valueOmitted ? "\(letter.valueBytes) bytes (not kept: too large)" : "\(letter.valueBytes) bytes"
            var record = HTML.escape(letter.deadLetterRecord)
            if let address {
                let link = HTML.link(
                    "/dead-letters/record",
                    [("partition", String(address.partition)), ("offset", String(address.offset))])
                record = "<a href=\"\(link)\">\(record)</a>"
            }
            let reprocess =
                letter.reprocessOutcome.map { outcome in
                    "re-driven: \(HTML.escape(outcome))"
                        + (letter.reprocessedAt.map { " at \(RFC3339.string($0))" } ?? "")
                } ?? "<code>\(HTML.escape(letter.reprocessCommand))</code>"
            html +=
                "<tr><td class=\"mono\">\(RFC3339.string(letter.failedAt))</td><td>\(HTML.escape(letter.reason))</td>"
                + "<td>\(purchase)</td><td>\(HTML.escape(letter.error))</td><td class=\"num\">\(letter.attempts)</td>"
                + "<td class=\"mono\">\(record) · \(size)</td><td>\(reprocess)</td></tr>\n"
        }
        html += "</tbody></table>\n"
        if let next = nextBefore {
            let parameters = (reason.map { [("reason", $0)] } ?? []) + [("before", CursorText.string(next))]
            html += "<p><a id=\"next-page\" href=\"\(HTML.link("/dead-letters", parameters))\">Older</a></p>\n"
        }
        return layout.page(title: "Dead letters", current: "/dead-letters", body: html)
    }
}

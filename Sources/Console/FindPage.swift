import Foundation
import Fulfilment
import Lookup
import Wire

/// The search, purchase-timeline and user's-purchases pages: what `iap-worker find` finds (the same
/// ``PurchaseFinder``), as HTML; the JSON is `find --json`'s (docs/schemas/find-output.schema.json).
struct FindPage: Sendable {
    var result: FindResult
    /// Where this page is, to make its "ask Gamebase now" and next-page links.
    var path: String
    var parameters: [(String, String)]

    var output: FindOutput { FindOutput(result) }

    func render(_ layout: ConsoleLayout, title: String, current: String) -> String {
        layout.page(title: title, current: current, body: body)
    }

    private func link(adding extra: [(String, String)]) -> String {
        let names = Set(extra.map(\.0))
        let all = parameters.filter { !names.contains($0.0) } + extra
        return HTML.link(path, all.map { (name: $0.0, value: $0.1) })
    }

    private var body: String {
        guard let kind = result.kind, !result.purchases.isEmpty else {
            return
                "<p id=\"summary\" class=\"notice\">Nothing found for <code>\(HTML.escape(result.id))</code> (tried it "
                + "as paymentSeq, store payment id and userId).</p>\n"
        }
        var html =
            "<p id=\"summary\"><code>\(HTML.escape(result.id))</code> is a \(Self.name(kind)): "
            + "\(result.purchases.count) purchase\(result.purchases.count == 1 ? "" : "s").</p>\n"
        let asked = result.purchases.contains { $0.gamebase != nil }
        if !asked {
            html +=
                "<p><a class=\"button\" id=\"ask-gamebase\" href=\"\(link(adding: [("gamebase", "1")]))\">Ask Gamebase "
                + "now</a> <span class=\"muted\">read-only: Get Payment Transaction, List Consumables; never Consume</span></p>\n"
        }
        for purchase in result.purchases { html += render(purchase) }
        if let next = result.nextBefore {
            html +=
                "<p><a id=\"next-page\" href=\"\(link(adding: [("before", CursorText.string(next))]))\">Older purchases</a></p>\n"
        }
        return html
    }

    private func render(_ purchase: PurchaseTimeline) -> String {
        var html = "<section class=\"purchase\">\n<h2>"
        if let seq = purchase.paymentSeq {
            html +=
                "purchase <a class=\"mono\" href=\"\(HTML.link("/purchase", [("seq", seq)]))\">\(HTML.escape(seq))</a>"
        } else if purchase.entries.first?.kind == .refusal {
            html += "refused store notification (no purchase)"
        } else {
            html += "malformed message (no paymentSeq)"
        }
        html += "</h2>\n<p>"
        if let userId = purchase.userId {
            html +=
                "userId <a class=\"mono\" href=\"\(HTML.link("/user", [("id", userId)]))\">\(HTML.escape(userId))</a> · "
        }
        if let paymentId = purchase.paymentId { html += "paymentId <code>\(HTML.escape(paymentId))</code> · " }
        html += "status: <span class=\"status\">\(HTML.escape(purchase.status))</span></p>\n"
        if !purchase.entries.isEmpty {
            html +=
                "<table class=\"timeline\"><thead><tr><th>time (UTC)</th><th>from</th><th>what</th><th>details</th></tr>"
                + "</thead><tbody>\n"
            for entry in purchase.entries {
                let details = entry.fields.sorted { $0.key < $1.key }
                    .map { "\(HTML.escape($0.key))=\(HTML.escape($0.value))" }.joined(separator: " ")
                html +=
                    "<tr class=\"entry-\(entry.kind.rawValue)\"><td class=\"mono\">\(RFC3339.string(entry.time))</td>"
                    + "<td>\(entry.origin.rawValue)</td><td>\(HTML.escape(entry.summary))</td>"
                    + "<td class=\"mono\">\(details)</td></tr>\n"
            }
            html += "</tbody></table>\n"
        }
        if let view = purchase.gamebase { html += render(view) }
        // Dead-lettered and not re-driven since: what to run.
        let reasons = Set(purchase.entries.filter { $0.kind == .deadLetter }.compactMap { $0.fields["reason"] })
        for reason in reasons.sorted() where purchase.status.contains("waiting for reprocess") {
            html +=
                "<p>To re-drive it (idempotent; every record dead-lettered for \(HTML.escape(reason)) goes with it): "
                + "<code class=\"reprocess\">\(HTML.escape(DeadLettersPage.command(reason: reason)))</code></p>\n"
        }
        return html + "</section>\n"
    }

    /// What people call each kind of id.
    static func name(_ kind: IdentifierKind) -> String {
        switch kind {
        case .paymentSeq: "paymentSeq"
        case .paymentId: "store payment id"
        case .userId: "userId"
        case .eventId: "event id"
        case .notificationId: "store notification id"
        }
    }

    private func render(_ view: GamebaseView) -> String {
        var html = "<div class=\"gamebase\"><h3>Gamebase now (\(RFC3339.string(view.checkedAt)))</h3>\n"
        html += "<p class=\"difference \(view.unreachable ? "bad" : "")\">\(HTML.escape(view.difference))</p>\n"
        if let payment = view.payment {
            let facts: [(String, String?)] = [
                ("userId", payment.userId), ("product", payment.gamebaseProductId), ("store", payment.marketId),
                ("price", payment.price.map { "\($0) \(payment.currency ?? "")" }), ("paymentId", payment.paymentId),
                ("isConsumable", payment.isConsumable.map { "\($0)" }),
                ("isTestPurchase", payment.isTestPurchase.map { "\($0)" }),
            ]
            html +=
                "<p class=\"mono\">Get Payment Transaction: "
                + facts.map { "\($0.0) \(HTML.escape($0.1 ?? "-"))" }.joined(separator: ", ") + "</p>\n"
        }
        if let listed = view.listedUnconsumed {
            html += "<p>List Consumables: \(listed ? "listed unconsumed" : "not listed unconsumed")</p>\n"
        }
        if let error = view.error { html += "<p class=\"bad\">error: \(HTML.escape(error))</p>\n" }
        return html + "</div>\n"
    }
}

import Foundation
import Fulfilment
import Wire

/// The stores' refunds as the ledger recorded them: counts per UTC day, the users whose grants were revoked most, and
/// the latest refund notifications, each linked to its purchase, its user and its payment. Each part is read on its
/// own: one that the ledger does not answer says so, the others are shown.
struct RefundsPage: Sendable {
    /// One UTC day's refund notifications, by what they did.
    struct Day: Encodable, Sendable, Hashable {
        /// `YYYY-MM-DD` (UTC).
        var day: String
        /// Refunds that revoked a grant.
        var revoked = 0
        /// Refunds of a payment not granted yet: its purchase will be rejected as `refunded`.
        var pending = 0
        /// Refunds of a payment refunded already.
        var alreadyRefunded = 0
        /// Refunds or reversals that matched nothing.
        var unmatched = 0
        var reversed = 0
        var declined = 0
        /// Every refund notification of the day (refunds, reversals, declined).
        var total = 0
    }

    struct User: Encodable, Sendable {
        var userId: String
        var revocations: Int
        var reversed: Int
        var lastRecordedAt: Date
        /// The console's page of the user's purchases.
        var purchases: String
    }

    struct Refund: Encodable, Sendable {
        var receivedAt: Date
        var occurredAt: Date
        var store: String
        var kind: String
        /// The store's own name (Apple's `notificationType/subtype`, Google's member).
        var storeType: String
        var outcome: String
        var notificationId: String
        var paymentId: String?
        var paymentSeq: String?
        var userId: String?
        var productId: String?
        var reason: String?
        var quantity: Int?
        var channel: String
        /// The console's page of its purchase, or of its payment when no grant matched.
        var timeline: String?
    }

    /// A record not believed, kept once per body: why, and where it last came from (to read it again).
    struct Refusal: Encodable, Sendable {
        var lastReceivedAt: Date
        var firstReceivedAt: Date
        var store: String?
        var code: String
        var detail: String
        var count: Int
        var source: String?
        var bodyHash: String
    }

    struct Output: Encodable, Sendable {
        var since: Date
        var days: [Day]?
        var users: [User]?
        var latest: [Refund]?
        var refused: [Refusal]?
        /// The parts the ledger did not answer, and why.
        var errors: [String: String]
    }

    static let days = 30
    static let usersShown = 20
    static let latestShown = 50
    static let refusedShown = 20

    var since: Date
    var days: [Day]?
    var users: [User]?
    var latest: [Refund]?
    var refused: [Refusal]?
    var errors: [String: String] = [:]

    /// The 30 days up to `now`'s, newest first, each with its counts (days without any show zeros).
    static func days(_ counts: [RefundDayCount], now: Date) -> [Day] {
        let today = RefundDayCount.day(ofEpochMilliseconds: Int64((now.timeIntervalSince1970 * 1_000).rounded(.down)))
        var byDay: [Date: Day] = [:]
        for index in 0..<Self.days {
            let day = today.addingTimeInterval(-Double(index) * 86_400)
            byDay[day] = Day(day: String(RFC3339.string(day).prefix(10)))
        }
        for count in counts {
            guard var day = byDay[count.day] else { continue }
            day.total += count.count
            switch (count.kind, count.outcome) {
            case (.refundDeclined, _): day.declined += count.count
            case (_, .revoked): day.revoked += count.count
            case (_, .pending): day.pending += count.count
            case (_, .alreadyRefunded): day.alreadyRefunded += count.count
            case (_, .reversed): day.reversed += count.count
            case (_, .unmatched): day.unmatched += count.count
            default: break
            }
            byDay[count.day] = day
        }
        return byDay.sorted { $0.key > $1.key }.map(\.value)
    }

    static func users(_ users: [RefundingUser]) -> [User] {
        users.map {
            User(
                userId: $0.userId, revocations: $0.revocations, reversed: $0.reversed,
                lastRecordedAt: $0.lastRecordedAt,
                purchases: HTML.url("/user", [("id", $0.userId)]))
        }
    }

    static func refunds(_ listings: [RefundListing]) -> [Refund] {
        listings.map { listing in
            let record = listing.record
            let n = record.notification
            var timeline: String?
            if let seq = record.paymentSeq {
                timeline = HTML.url("/purchase", [("seq", seq)])
            } else if let paymentId = n.paymentId {
                timeline = HTML.url("/search", [("q", paymentId)])
            }
            return Refund(
                receivedAt: record.receivedAt, occurredAt: n.occurredAt, store: n.store.rawValue, kind: n.kind.rawValue,
                storeType: n.storeType, outcome: record.outcome.rawValue, notificationId: n.notificationId,
                paymentId: n.paymentId, paymentSeq: record.paymentSeq, userId: listing.userId, productId: n.productId,
                reason: n.reason, quantity: n.quantity, channel: record.channel.rawValue, timeline: timeline)
        }
    }

    static func refusals(_ refused: [RefusedNotification]) -> [Refusal] {
        refused.map {
            Refusal(
                lastReceivedAt: $0.lastReceivedAt, firstReceivedAt: $0.firstReceivedAt, store: $0.store?.rawValue,
                code: $0.code, detail: $0.detail, count: $0.count, source: $0.source, bodyHash: $0.bodyHash)
        }
    }

    var output: Output {
        Output(since: since, days: days, users: users, latest: latest, refused: refused, errors: errors)
    }

    func render(_ layout: ConsoleLayout) -> String {
        var html =
            "<p>What the stores said about refunds, as this ledger recorded it (the last \(Self.days) days, by when the "
            + "worker received each notification). A revoked grant was published as an <code>item-revoked</code> "
            + "event; a pending refund makes its purchase a <code>refunded</code> rejection when it comes.</p>\n"
        html += "<h2>Per day</h2>\n"
        if let days {
            html +=
                "<table id=\"refund-days\"><thead><tr><th>day (UTC)</th><th class=\"num\">revoked</th>"
                + "<th class=\"num\">pending</th><th class=\"num\">already refunded</th><th class=\"num\">unmatched</th>"
                + "<th class=\"num\">reversed</th><th class=\"num\">declined</th><th class=\"num\">all</th></tr></thead><tbody>\n"
            // Days without any refund are left out of the table (the JSON has all of them); the sum closes it.
            var sum = Day(day: "\(Self.days) days")
            for day in days {
                sum.revoked += day.revoked
                sum.pending += day.pending
                sum.alreadyRefunded += day.alreadyRefunded
                sum.unmatched += day.unmatched
                sum.reversed += day.reversed
                sum.declined += day.declined
                sum.total += day.total
            }
            for day in days where day.total > 0 { html += Self.row(day) }
            html += "</tbody><tfoot>\(Self.row(sum))</tfoot></table>\n"
        } else {
            html += notice("refund-days", errors["days"])
        }
        html += "<h2>Users with the most revoked grants in \(Self.days) days</h2>\n"
        if let users, users.isEmpty {
            html += "<p class=\"muted\" id=\"refund-users\">No grant revoked in the last \(Self.days) days.</p>\n"
        } else if let users {
            html +=
                "<table id=\"refund-users\"><thead><tr><th>userId</th><th class=\"num\">revoked</th>"
                + "<th class=\"num\">of those reversed</th><th>latest (UTC)</th></tr></thead><tbody>\n"
            for user in users {
                html +=
                    "<tr><td><a class=\"mono\" href=\"\(HTML.escape(user.purchases))\">\(HTML.escape(user.userId))</a></td>"
                    + "<td class=\"num\">\(user.revocations)</td><td class=\"num\">\(user.reversed)</td>"
                    + "<td class=\"mono\">\(RFC3339.string(user.lastRecordedAt))</td></tr>\n"
            }
            html += "</tbody></table>\n"
        } else {
            html += notice("refund-users", errors["users"])
        }
        html += "<h2>Latest refund notifications</h2>\n"
        if let latest, latest.isEmpty {
            html += "<p class=\"muted\" id=\"refund-latest\">No refund notification recorded.</p>\n"
        } else if let latest {
            html +=
                "<table id=\"refund-latest\"><thead><tr><th>received (UTC)</th><th>store</th><th>notification</th>"
                + "<th>what it did</th><th>purchase</th><th>user</th><th>product</th><th>store's reason</th></tr>"
                + "</thead><tbody>\n"
            for refund in latest {
                let purchase: String
                if let timeline = refund.timeline {
                    let label = refund.paymentSeq ?? refund.paymentId ?? ""
                    purchase = "<a class=\"mono\" href=\"\(HTML.escape(timeline))\">\(HTML.escape(label))</a>"
                } else {
                    purchase = "<span class=\"muted\">names no payment</span>"
                }
                let user =
                    refund.userId.map {
                        "<a class=\"mono\" href=\"\(HTML.link("/user", [("id", $0)]))\">\(HTML.escape($0))</a>"
                    } ?? "<span class=\"muted\">no grant</span>"
                let reason = [refund.reason, refund.quantity.map { "quantity \($0)" }].compactMap { $0 }
                    .joined(separator: ", ")
                html +=
                    "<tr><td class=\"mono\">\(RFC3339.string(refund.receivedAt))</td><td>\(HTML.escape(refund.store))</td>"
                    + "<td><span class=\"mono\">\(HTML.escape(refund.storeType))</span><br>"
                    + "<a class=\"mono muted\" href=\"\(HTML.link("/search", [("q", refund.notificationId)]))\">"
                    + "\(HTML.escape(refund.notificationId))</a></td>"
                    + "<td>\(HTML.escape(refund.outcome))</td><td>\(purchase)</td><td>\(user)</td>"
                    + "<td class=\"mono\">\(HTML.escape(refund.productId ?? ""))</td><td>\(HTML.escape(reason))</td></tr>\n"
            }
            html += "</tbody></table>\n"
        } else {
            html += notice("refund-latest", errors["latest"])
        }
        html += "<h2>Refused notifications</h2>\n"
        if let refused, refused.isEmpty {
            html += "<p class=\"muted\" id=\"refund-refused\">No notification refused.</p>\n"
        } else if let refused {
            html +=
                "<p>Records the worker did not believe (a bad signature, another app, a clock too far from the store's), "
                + "kept once per body. <code>where</code> says where each last came from: read it again there once the "
                + "cause is fixed (docs/runbook.md, <em>Reading a refused notification again</em>).</p>\n"
                + "<table id=\"refund-refused\"><thead><tr><th>last received (UTC)</th><th>store</th><th>why</th>"
                + "<th>where</th><th class=\"num\">times</th><th>body (SHA-256)</th></tr></thead><tbody>\n"
            for refusal in refused {
                html +=
                    "<tr><td class=\"mono\">\(RFC3339.string(refusal.lastReceivedAt))</td>"
                    + "<td>\(HTML.escape(refusal.store ?? "unknown"))</td>"
                    + "<td><span class=\"mono\">\(HTML.escape(refusal.code))</span><br>\(HTML.escape(refusal.detail))</td>"
                    + "<td class=\"mono\">\(HTML.escape(refusal.source ?? "not kept (an older version refused it)"))</td>"
                    + "<td class=\"num\">\(refusal.count)</td>"
                    + "<td class=\"mono muted\">\(HTML.escape(String(refusal.bodyHash.prefix(16))))…</td></tr>\n"
            }
            html += "</tbody></table>\n"
        } else {
            html += notice("refund-refused", errors["refused"])
        }
        return layout.page(title: "Refunds", current: "/refunds", body: html)
    }

    private static func row(_ day: Day) -> String {
        "<tr><td class=\"mono\">\(day.day)</td><td class=\"num\">\(day.revoked)</td>"
            + "<td class=\"num\">\(day.pending)</td><td class=\"num\">\(day.alreadyRefunded)</td>"
            + "<td class=\"num\">\(day.unmatched)</td><td class=\"num\">\(day.reversed)</td>"
            + "<td class=\"num\">\(day.declined)</td><td class=\"num\">\(day.total)</td></tr>\n"
    }

    private func notice(_ id: String, _ error: String?) -> String {
        "<p class=\"notice\" id=\"\(id)\">The ledger did not say: \(HTML.escape(error ?? "not read"))</p>\n"
    }
}

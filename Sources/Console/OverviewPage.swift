import Foundation
import Fulfilment
import Wire

/// The overview: throughput and outcomes over the last 5 and 60 minutes, what is in flight and behind, the circuit,
/// the ledger and the configuration as `/readyz` sees them, unconsumed grants, dead letters, the last reconciliation.
struct OverviewPage: Encodable, Sendable {
    /// Dead letters the ledger recorded in the last day, by reason, read newest first up to a bound.
    struct RecordedDeadLetters: Encodable, Sendable {
        var since: Date
        var byReason: [String: Int]
        /// More than ``read`` were recorded: the counts are of the newest only.
        var capped: Bool
        var read: Int
        /// Why the ledger could not say (it is down or slow).
        var error: String?
    }

    var generatedAt: Date
    var environment: String
    var status: WorkerStatus
    var windows: [OutcomeHistory.Window]
    var recordedDeadLetters: RecordedDeadLetters

    func render(_ layout: ConsoleLayout, refreshSeconds: Int) -> String {
        layout.page(
            title: "Overview", current: "/", refreshSeconds: refreshSeconds, now: generatedAt,
            body: cards + windowsTable + lagTable + deadLetterTable + reconcileSection + settingsTable)
    }

    private func card(_ label: String, _ value: String, _ style: String = "", id: String) -> String {
        "<div class=\"card\" id=\"\(id)\"><div class=\"label\">\(HTML.escape(label))</div>"
            + "<div class=\"value \(style)\">\(HTML.escape(value))</div></div>\n"
    }

    private var cards: String {
        var html = "<div class=\"cards\">\n"
        html += card(
            "Ready (/readyz)", status.ready ? "ready" : status.readiness, status.ready ? "ok" : "bad", id: "ready")
        html += card(
            "Gamebase circuit", status.circuitOpen ? "open" : "closed", status.circuitOpen ? "bad" : "ok", id: "circuit"
        )
        html += card(
            "Ledger", status.ledgerReachable ? "reachable" : "unreachable", status.ledgerReachable ? "ok" : "bad",
            id: "ledger")
        html += card(
            "Configuration", status.stoppedBy.map { "stopped: \($0)" } ?? "accepted by Gamebase",
            status.stoppedBy == nil ? "ok" : "bad", id: "configuration")
        html += card("In flight", "\(status.inFlight)", id: "in-flight")
        html += card(
            "Consumer lag",
            status.consumerLag.isEmpty ? "no partitions" : "\(status.consumerLag.reduce(0) { $0 + $1.lag })",
            id: "lag")
        let unconsumed = status.unconsumedGrants.map(String.init) ?? "not swept yet"
        html += card(
            "Unconsumed grants", unconsumed, (status.unconsumedGrants ?? 0) > 0 ? "warn" : "", id: "unconsumed")
        html += card(
            "Oldest unconsumed grant",
            status.oldestUnconsumedGrantAgeSeconds.map { $0 > 0 ? Self.age($0) : "none" } ?? "not swept yet",
            (status.oldestUnconsumedGrantAgeSeconds ?? 0) > 300 ? "bad" : "", id: "oldest-unconsumed")
        // Revoked grants Gamebase will not consume: not retried, told apart (docs/runbook.md#iapworkergrantsawaitingconsume).
        if let setAside = status.setAsideGrants, setAside > 0 {
            html += card(
                "Consume set aside", "\(setAside) revoked grant\(setAside == 1 ? "" : "s")", "warn", id: "set-aside")
        }
        return html + "</div>\n"
    }

    private var windowsTable: String {
        var html =
            "<h2>Purchases</h2>\n<table id=\"outcomes\"><thead><tr><th>window</th><th class=\"num\">per second</th>"
        for outcome in Self.outcomes {
            html += "<th class=\"num\">\(outcome.replacingOccurrences(of: "_", with: " "))</th>"
        }
        html += "<th>rejections by reason</th><th>dead letters by reason</th></tr></thead><tbody>\n"
        for window in windows {
            // The samples are 10 s apart: a window that covers other than its length says what it covers.
            let off = window.coveredSeconds - window.minutes * 60
            let covered =
                off < -15
                ? " <span class=\"muted\">(since start, \(Self.age(Double(window.coveredSeconds))))</span>"
                : off > 15
                    ? " <span class=\"muted\">(over the last \(Self.age(Double(window.coveredSeconds))))</span>" : ""
            html += "<tr><td>last \(window.minutes) min\(covered)</td>"
            html += "<td class=\"num\">\(String(format: "%.1f", window.perSecond))</td>"
            for outcome in Self.outcomes { html += "<td class=\"num\">\(window.outcomes[outcome] ?? 0)</td>" }
            html += "<td>\(Self.reasons(window.rejections))</td><td>\(Self.reasons(window.deadLetters))</td></tr>\n"
        }
        return html + "</tbody></table>\n"
    }

    private var lagTable: String {
        guard !status.consumerLag.isEmpty else {
            return
                "<h2>Consumer lag</h2>\n<p class=\"muted\" id=\"lag-table\">No partition assigned to this instance (or "
                + "no statistics yet: librdkafka reports every 5 s).</p>\n"
        }
        var html =
            "<h2>Consumer lag</h2>\n<table id=\"lag-table\"><thead><tr><th>topic</th><th class=\"num\">partition</th>"
            + "<th class=\"num\">messages behind</th></tr></thead><tbody>\n"
        for lag in status.consumerLag {
            html +=
                "<tr><td>\(HTML.escape(lag.topic))</td><td class=\"num\">\(lag.partition)</td>"
                + "<td class=\"num\">\(lag.lag)</td></tr>\n"
        }
        return html + "</tbody></table>\n"
    }

    private var deadLetterTable: String {
        let recorded = recordedDeadLetters
        var html = "<h2>Dead letters recorded in the last 24 h</h2>\n"
        if let error = recorded.error {
            return html
                + "<p class=\"notice\" id=\"recorded-dead-letters\">The ledger did not say: \(HTML.escape(error))</p>\n"
        }
        guard !recorded.byReason.isEmpty else {
            return html + "<p class=\"muted\" id=\"recorded-dead-letters\">None.</p>\n"
        }
        html +=
            "<table id=\"recorded-dead-letters\"><thead><tr><th>reason</th><th class=\"num\">dead letters</th><th>"
            + "</th></tr></thead><tbody>\n"
        for (reason, count) in recorded.byReason.sorted(by: { ($1.value, $0.key) < ($0.value, $1.key) }) {
            html +=
                "<tr><td>\(HTML.escape(reason))</td><td class=\"num\">\(count)\(recorded.capped ? "+" : "")</td>"
                + "<td><a href=\"\(HTML.link("/dead-letters", [("reason", reason)]))\">list</a></td></tr>\n"
        }
        if recorded.capped {
            html += "<tr><td colspan=\"3\" class=\"muted\">Counted over the newest \(recorded.read) only.</td></tr>\n"
        }
        return html + "</tbody></table>\n"
    }

    private var reconcileSection: String {
        var html = "<h2>Reconciliation</h2>\n"
        guard status.reconciliationEnabled else {
            return html + "<p class=\"muted\" id=\"reconcile\">Off (reconcile.interval_ms is 0).</p>\n"
        }
        guard let pass = status.lastReconcilePass else {
            return html + "<p class=\"muted\" id=\"reconcile\">No pass has ended since this instance started.</p>\n"
        }
        html +=
            "<p id=\"reconcile\">Last pass ended \(RFC3339.string(pass.endedAt)) after "
            + "\(String(format: "%.1f", pass.durationSeconds)) s: \(pass.usersChecked) users checked, \(pass.usersLeft) left"
        if let stopped = pass.stoppedEarly {
            html += ", <span class=\"warn\">stopped early: \(HTML.escape(stopped))</span>"
        }
        html += ". Payments: \(Self.reasons(pass.outcomes)).</p>\n"
        return html
    }

    private var settingsTable: String {
        var html = "<h2>Configuration</h2>\n<table id=\"settings\"><tbody>\n"
        for setting in status.settings {
            html +=
                "<tr><th>\(HTML.escape(setting.key))</th><td class=\"mono\">\(HTML.escape(setting.value))</td></tr>\n"
        }
        html += "<tr><th>version</th><td class=\"mono\">\(HTML.escape(status.version))</td></tr>\n"
        return html + "</tbody></table>\n"
    }

    static let outcomes = PurchaseOutcome.countedLabels

    static func reasons(_ counts: [String: Int]) -> String {
        guard !counts.isEmpty else { return "<span class=\"muted\">none</span>" }
        return counts.sorted { ($1.value, $0.key) < ($0.value, $1.key) }
            .map { "\(HTML.escape($0.key)) \($0.value)" }.joined(separator: ", ")
    }

    static func age(_ seconds: Double) -> String {
        let seconds = Int(seconds.rounded())
        if seconds < 120 { return "\(seconds) s" }
        if seconds < 7_200 { return "\(seconds / 60) min" }
        if seconds < 172_800 { return "\(seconds / 3_600) h" }
        return "\(seconds / 86_400) days"
    }
}

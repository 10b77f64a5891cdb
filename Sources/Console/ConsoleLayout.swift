import Foundation
import Fulfilment
import Wire

/// The frame of every page: the environment's banner, the navigation with the search box, the footer. Server-rendered,
/// no script at all (the overview reloads itself with a `<meta http-equiv="refresh">`), one stylesheet from this
/// binary: it works air-gapped and under a Content-Security-Policy that allows nothing else.
struct ConsoleLayout: Sendable {
    var environment: String
    var instance: String
    var version: String

    /// The banner's words, and its class (production is red).
    var banner: (text: String, style: String) {
        let name = environment.trimmingCharacters(in: .whitespaces)
        if name.isEmpty { return ("environment not named (console.environment)", "env-unnamed") }
        let lower = name.lowercased()
        let style = lower.hasPrefix("prod") || lower == "live" ? "env-production" : "env-other"
        return (name.uppercased(), style)
    }

    func page(title: String, current: String, refreshSeconds: Int? = nil, now: Date = Date(), body: String) -> String {
        let banner = banner
        var html = """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="referrer" content="no-referrer">

            """
        if let refreshSeconds { html += "<meta http-equiv=\"refresh\" content=\"\(refreshSeconds)\">\n" }
        html += """
            <title>\(HTML.escape(title)) · iap-worker · \(HTML.escape(banner.text))</title>
            <link rel="stylesheet" href="/console.css">
            <link rel="icon" href="/favicon.ico" type="image/svg+xml">
            </head>
            <body>
            <header class="banner \(banner.style)" id="banner">
            <span class="env">\(HTML.escape(banner.text))</span>
            <span>iap-worker console · read-only · instance \(HTML.escape(instance)) · all times UTC</span>
            </header>
            <nav>
            \(navLink("/", "Overview", current)) \(navLink("/search", "Search", current)) \(navLink("/dead-letters", "Dead letters", current)) \(navLink("/refunds", "Refunds", current))
            <form action="/search" method="get" class="searchbox" role="search">
            <input type="search" name="q" placeholder="paymentSeq, store payment id, userId or event id" maxlength="1024" aria-label="id">
            <button type="submit">Find</button>
            </form>
            </nav>
            <main>
            <h1>\(HTML.escape(title))</h1>
            \(body)
            </main>
            <footer>iap-worker \(HTML.escape(version)) · generated \(RFC3339.string(now)) · every page is also JSON (Accept: application/json)</footer>
            </body>
            </html>

            """
        return html
    }

    private func navLink(_ path: String, _ label: String, _ current: String) -> String {
        "<a href=\"\(path)\"\(path == current ? " aria-current=\"page\"" : "")>\(label)</a>"
    }
}

/// The stylesheet, compiled into the binary.
enum ConsoleStyle {
    static let css = """
        :root { --fg: #1d2330; --muted: #5b6475; --line: #d9dde5; --bg: #f6f7f9; --card: #fff; --bad: #b42318; \
        --good: #067647; --warn: #b54708; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); \
        background: var(--bg); }
        .banner { display: flex; gap: 1em; align-items: center; padding: .45em 1.2em; color: #fff; font-size: 13px; }
        .banner .env { font-weight: 700; letter-spacing: .06em; }
        .env-production { background: #b42318; }
        .env-other { background: #175cd3; }
        .env-unnamed { background: #475467; }
        nav { display: flex; gap: 1.2em; align-items: center; padding: .6em 1.2em; background: var(--card); \
        border-bottom: 1px solid var(--line); }
        nav a { color: var(--fg); text-decoration: none; font-weight: 600; }
        nav a[aria-current=page] { border-bottom: 2px solid #175cd3; }
        .searchbox { margin-left: auto; display: flex; gap: .4em; }
        .searchbox input { width: 28em; padding: .35em .5em; border: 1px solid var(--line); border-radius: 4px; }
        button, .button { padding: .35em .8em; border: 1px solid #175cd3; background: #175cd3; color: #fff; \
        border-radius: 4px; text-decoration: none; font: inherit; cursor: pointer; }
        main { padding: 1em 1.2em 2em; max-width: 1200px; }
        h1 { font-size: 20px; margin: .3em 0 .8em; }
        h2 { font-size: 16px; margin: 1.4em 0 .5em; }
        .cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(210px, 1fr)); gap: .8em; }
        .card { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: .7em .9em; }
        .card .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
        .card .value { font-size: 20px; font-weight: 650; }
        .ok { color: var(--good); } .bad { color: var(--bad); } .warn { color: var(--warn); } .muted { color: var(--muted); }
        table { border-collapse: collapse; width: 100%; background: var(--card); border: 1px solid var(--line); }
        th, td { text-align: left; padding: .35em .6em; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { font-size: 12px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
        .timeline td:first-child, #letters td:first-child { white-space: nowrap; }
        td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
        tfoot td { font-weight: 650; }
        code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; \
        overflow-wrap: anywhere; }
        pre { background: #101828; color: #f2f4f7; padding: .6em .8em; border-radius: 4px; overflow-x: auto; }
        .purchase { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: .2em 1em 1em; \
        margin-bottom: 1em; }
        .status { font-weight: 650; }
        .notice { padding: .6em .9em; border-radius: 4px; background: #fef3f2; border: 1px solid #fecdca; }
        footer { padding: 1em 1.2em; color: var(--muted); font-size: 12px; }
        """

    /// The tab's icon (browsers ask for one; a missing one would be an error in every page's log).
    static let icon = """
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#175cd3"/>\
        <path d="M4 8.5l2.5 2.5L12 5.5" stroke="#fff" stroke-width="2" fill="none"/></svg>
        """
}

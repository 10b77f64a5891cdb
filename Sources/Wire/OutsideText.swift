/// Text from outside (a store's answer, a notification's field) made fit for an error or a log line.
package enum OutsideText {
    /// At most `limit` characters; control characters (C0 and C1) and format characters (bidirectional overrides,
    /// zero-width ones) as `?`, so the line cannot be rewritten on a terminal or a page.
    package static func printable(_ text: String, limit: Int) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.prefix(limit).map {
                    switch $0.properties.generalCategory {
                    case .control, .format: "?"
                    default: $0
                    }
                }))
    }

    /// Whether a URL's host is this machine (where plain HTTP may carry a secret: a simulator).
    package static func isLoopbackHost(_ host: String) -> Bool {
        ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host.lowercased())
    }
}

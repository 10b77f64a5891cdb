import Foundation

/// One dead-lettered record's value (`console.show_payloads`), as ``PayloadView`` shows it.
struct RecordPage: Encodable, Sendable {
    var topic: String
    var partition: Int32
    var offset: Int64
    /// The value's size.
    var bytes: Int
    var json: Bool
    var truncated: Bool
    /// The value as shown: pretty JSON with tokens, secrets and passwords hidden, or text; empty when withheld.
    var value: String
    /// Why the value is not shown at all.
    var withheld: String?

    init(topic: String, partition: Int32, offset: Int64, bytes: Int, view: PayloadView.View) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.bytes = bytes
        json = view.json
        truncated = view.truncated
        value = view.text
        withheld = view.withheld
    }

    func render(_ layout: ConsoleLayout) -> String {
        var body = "<p class=\"mono\">\(HTML.escape("\(topic)/\(partition)/\(offset)")) · \(bytes) bytes · "
        if let withheld {
            body += "not shown: \(HTML.escape(withheld))</p>\n"
            return layout.page(title: "Dead-lettered record", current: "/dead-letters", body: body)
        }
        body += json ? "JSON, tokens shown as a hash, secrets and passwords hidden" : "not JSON: shown as text, escaped"
        if truncated { body += " · the first \(PayloadView.maxShownBytes) bytes" }
        body += "</p>\n<pre id=\"record-value\">\(HTML.escapeBlock(value))</pre>\n"
        return layout.page(title: "Dead-lettered record", current: "/dead-letters", body: body)
    }
}

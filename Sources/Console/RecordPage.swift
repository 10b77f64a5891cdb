import Foundation

/// One dead-lettered record's value (`console.show_payloads`), tokens masked.
struct RecordPage: Encodable, Sendable {
    var topic: String
    var partition: Int32
    var offset: Int64
    /// The value's size.
    var bytes: Int
    var json: Bool
    var truncated: Bool
    /// The value as shown: pretty JSON with tokens, secrets and passwords replaced by a short hash, or escaped text.
    var value: String

    init(topic: String, partition: Int32, offset: Int64, bytes: Int, view: (text: String, json: Bool, truncated: Bool))
    {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.bytes = bytes
        json = view.json
        truncated = view.truncated
        value = view.text
    }

    func render(_ layout: ConsoleLayout) -> String {
        var body = "<p class=\"mono\">\(HTML.escape("\(topic)/\(partition)/\(offset)")) · \(bytes) bytes · "
        body += json ? "JSON, tokens, secrets and passwords shown as a hash" : "not JSON: shown as text, escaped"
        if truncated { body += " · the first \(PayloadView.maxShownBytes) bytes" }
        body += "</p>\n<pre id=\"record-value\">\(HTML.escape(value))</pre>\n"
        return layout.page(title: "Dead-lettered record", current: "/dead-letters", body: body)
    }
}

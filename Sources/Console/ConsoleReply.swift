import Foundation
import Fulfilment
import Wire

/// A page in both of its forms: HTML for people, JSON for `Accept: application/json`.
struct ConsoleReply: Sendable {
    var status: Int
    var html: String
    var json: Data

    init<Output: Encodable>(status: Int = 200, html: String, json output: Output) {
        self.status = status
        self.html = html
        self.json = (try? ConsoleJSON.encoder.encode(output)) ?? Data("{}".utf8)
    }
}

enum ConsoleJSON {
    /// Sorted keys, times in RFC 3339 UTC with milliseconds (as `find --json`).
    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(RFC3339.string(date))
        }
        return encoder
    }
}

/// A page that could not be made: its status and what to tell the reader.
struct ConsoleProblem: Encodable, Sendable {
    var error: String
    var status: Int
}

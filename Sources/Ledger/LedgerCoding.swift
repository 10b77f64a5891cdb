import Foundation
import Fulfilment
import Wire

/// Encodings shared by both stores.
enum LedgerCoding {
    /// `[{"name":…,"value":…},…]`, the form `JSONEncoder` gives `[EventHeader]`, written by hand: it runs on
    /// the writer for every event.
    static func encodeHeaders(_ headers: [EventHeader]) -> String {
        var text = "["
        for (index, header) in headers.enumerated() {
            if index > 0 { text += "," }
            JSONText.appendObject(to: &text) { object in
                object.string("name", header.name)
                object.string("value", header.value)
            }
        }
        return text + "]"
    }

    static func decodeHeaders(_ text: String) -> [EventHeader] {
        (try? JSONDecoder().decode([EventHeader].self, from: Data(text.utf8))) ?? []
    }
}

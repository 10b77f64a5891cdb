import Foundation

/// Encodings shared by both stores.
enum LedgerCoding {
    /// `[{"name":…,"value":…},…]`, the form `JSONEncoder` gives `[EventHeader]`, written by hand: it runs on
    /// the writer for every event.
    static func encodeHeaders(_ headers: [EventHeader]) -> String {
        var text = "["
        for (index, header) in headers.enumerated() {
            text += index == 0 ? "{" : ",{"
            JSONText.appendKey("name", to: &text, first: true)
            JSONText.appendString(header.name, to: &text)
            JSONText.appendKey("value", to: &text)
            JSONText.appendString(header.value, to: &text)
            text += "}"
        }
        return text + "]"
    }

    static func decodeHeaders(_ text: String) -> [EventHeader] {
        (try? JSONDecoder().decode([EventHeader].self, from: Data(text.utf8))) ?? []
    }
}

import Foundation

/// JSON text written by hand (RFC 8259), for the per-purchase encodings where `JSONEncoder` showed in profiles:
/// outbox headers, CloudEvents, log lines. What it writes is what `JSONEncoder` writes (without escaped
/// slashes) for the same values, keys in the order they are written.
public enum JSONText {
    /// Appends `value` as a JSON string literal.
    public static func appendString(_ value: String, to text: inout String) {
        text += "\""
        let scalars = value.unicodeScalars
        var plainStart = scalars.startIndex
        var index = scalars.startIndex
        // Copies runs of scalars that need no escaping in one step.
        while index != scalars.endIndex {
            let scalar = scalars[index]
            if scalar == "\"" || scalar == "\\" || scalar.value < 0x20 {
                text += Substring(scalars[plainStart..<index])
                switch scalar {
                case "\"": text += "\\\""
                case "\\": text += "\\\\"
                case "\n": text += "\\n"
                case "\r": text += "\\r"
                case "\t": text += "\\t"
                case "\u{8}": text += "\\b"
                case "\u{c}": text += "\\f"
                default:
                    let hex = String(scalar.value, radix: 16)
                    text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                }
                plainStart = scalars.index(after: index)
            }
            index = scalars.index(after: index)
        }
        text += Substring(scalars[plainStart..<scalars.endIndex])
        text += "\""
    }

    /// Appends a JSON object whose members `body` writes.
    public static func appendObject(to text: inout String, _ body: (inout JSONObject) -> Void) {
        // The object takes the buffer over while it writes, so appending never copies it.
        var object = JSONObject(text: text)
        text = ""
        object.text += "{"
        body(&object)
        object.text += "}"
        text = object.text
    }
}

/// The members of a JSON object being written; an absent optional leaves its member out, as `Codable` does.
public struct JSONObject {
    fileprivate var text: String
    private var isEmpty = true

    fileprivate init(text: String) {
        self.text = text
    }

    /// Keys are fixed ASCII names, written as they are.
    private mutating func key(_ key: StaticString) {
        text += isEmpty ? "\"" : ",\""
        isEmpty = false
        text += key.description
        text += "\":"
    }

    public mutating func string(_ key: StaticString, _ value: String?) {
        guard let value else { return }
        self.key(key)
        JSONText.appendString(value, to: &text)
    }

    public mutating func integer(_ key: StaticString, _ value: (some BinaryInteger)?) {
        guard let value else { return }
        self.key(key)
        text += String(value)
    }

    public mutating func decimal(_ key: StaticString, _ value: Decimal?) {
        guard let value else { return }
        self.key(key)
        text += DecimalText.description(value)
    }

    public mutating func bool(_ key: StaticString, _ value: Bool) {
        self.key(key)
        text += value ? "true" : "false"
    }

    /// A member whose value is JSON text written already (`json` must be valid JSON: it is not checked).
    package mutating func raw(_ key: StaticString, _ json: String) {
        self.key(key)
        text += json
    }

    public mutating func object(_ key: StaticString, _ body: (inout JSONObject) -> Void) {
        self.key(key)
        JSONText.appendObject(to: &text, body)
    }
}

import Foundation

/// JSON text written by hand (RFC 8259), for the per-purchase encodings where `JSONEncoder` showed in profiles:
/// outbox headers, CloudEvents, log lines. What it writes is what `JSONEncoder` writes (without escaped
/// slashes) for the same values, keys in the order they are written.
public enum JSONText {
    /// Appends `value` as a JSON string literal.
    public static func appendString(_ value: String, to text: inout String) {
        text += "\""
        // Every byte that needs escaping is ASCII, and no byte of a multi-byte UTF-8 sequence is: the bytes are
        // scanned, and a string without one (nearly every string) is appended whole.
        let utf8 = value.utf8
        guard let first = utf8.firstIndex(where: needsEscape) else {
            text += value
            text += "\""
            return
        }
        // Runs are cut at escaped bytes, which are whole scalars: the scalar view's slices (never `value[…]`, which
        // rounds to a character's start, and a combining mark may follow a quote) copy them exactly.
        let scalars = value.unicodeScalars
        var plainStart = utf8.startIndex
        var index = first
        while index != utf8.endIndex {
            let byte = utf8[index]
            if needsEscape(byte) {
                text += Substring(scalars[plainStart..<index])
                switch byte {
                case UInt8(ascii: "\""): text += "\\\""
                case UInt8(ascii: "\\"): text += "\\\\"
                case 0x0A: text += "\\n"
                case 0x0D: text += "\\r"
                case 0x09: text += "\\t"
                case 0x08: text += "\\b"
                case 0x0C: text += "\\f"
                default:
                    text += "\\u00"
                    text.unicodeScalars.append(hexDigit(byte >> 4))
                    text.unicodeScalars.append(hexDigit(byte & 0x0F))
                }
                plainStart = utf8.index(after: index)
            }
            index = utf8.index(after: index)
        }
        text += Substring(scalars[plainStart..<utf8.endIndex])
        text += "\""
    }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    private static func hexDigit(_ nibble: UInt8) -> Unicode.Scalar {
        Unicode.Scalar(nibble < 10 ? 0x30 + nibble : 0x57 + nibble)
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

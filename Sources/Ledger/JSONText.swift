/// JSON text written by hand (RFC 8259), for the per-purchase encodings where `JSONEncoder` showed in profiles:
/// outbox headers, CloudEvents, log lines.
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

    /// Appends `"key":` (the key is written as is: callers pass fixed ASCII names).
    public static func appendKey(_ key: StaticString, to text: inout String, first: Bool = false) {
        if !first { text += "," }
        text += "\""
        text += key.description
        text += "\":"
    }
}

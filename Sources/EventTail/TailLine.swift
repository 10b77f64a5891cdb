import Fulfilment
import Wire

/// The lines `events tail` prints: one readable line, or one JSON object, per event.
///
/// Every field comes from a record anyone with write access to the topics could have written, so each is clipped and
/// escaped: no control character (newline, carriage return, ESC …), no bidirectional or other format character, no
/// line separator ever reaches the terminal as such, so a hostile userId cannot forge or hide lines. In text, a
/// backslash and a space are escaped too (`\\`, `\u{20}`), so fields stay one word each and the escaping is
/// unambiguous; unknown fields are `-`.
public enum TailLine {
    /// Fields longer than this many Unicode scalars are clipped, and end with `…`.
    public static let fieldLimit = 256

    /// `2026-01-02T03:04:05.678Z item-granted   paymentSeq=… userId=… product=… source=message`.
    public static func text(_ event: TailEvent) -> String {
        var line = event.timestampMilliseconds.map { RFC3339.string(epochMilliseconds: $0) } ?? "-"
        line += " " + event.kind.rawValue.padding(toLength: 14)
        line += " paymentSeq=" + field(event.paymentSeq)
        line += " userId=" + field(event.userId)
        switch event.kind {
        case .itemGranted:
            line += " product=" + field(event.product)
            line += " source=" + field(event.source)
        case .consumeFailed:
            line += " reason=" + field(event.reason)
        case .deadLetter:
            line += " reason=" + field(event.reason)
            line += " source=" + field(event.source)
        case .itemRevoked, .refundReversed:
            line += " product=" + field(event.product)
            line += " reason=" + field(event.reason)
            line += " source=" + field(event.source)
        }
        return line
    }

    /// One JSON object (docs/schemas/events-tail-line.schema.json); every member is present, `null` when unknown.
    public static func json(_ event: TailEvent) -> String {
        var members: [(String, String)] = [
            ("time", string(event.timestampMilliseconds.map { RFC3339.string(epochMilliseconds: $0) })),
            ("type", string(event.kind.rawValue)),
            ("paymentSeq", string(event.paymentSeq)),
            ("userId", string(event.userId)),
            ("product", string(event.product)),
            ("reason", string(event.reason)),
            ("source", string(event.source)),
        ]
        members.append(("originalTopic", string(event.origin?.topic)))
        members.append(("originalPartition", event.origin.map { String($0.partition) } ?? "null"))
        members.append(("originalOffset", event.origin.map { String($0.offset) } ?? "null"))
        members.append(("topic", string(event.topic)))
        members.append(("partition", String(event.partition)))
        members.append(("offset", String(event.offset)))
        return "{" + members.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    // MARK: Escaping

    /// A text field: clipped, escaped, `-` when unknown or empty.
    static func field(_ value: String?) -> String {
        guard let value, !value.isEmpty else { return "-" }
        var text = ""
        for scalar in clipped(value) {
            if scalar == "\\" {
                text += "\\\\"
            } else if scalar == " " || isUnsafe(scalar) {
                text += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                text.unicodeScalars.append(scalar)
            }
        }
        return text + (value.unicodeScalars.count > fieldLimit ? "…" : "")
    }

    /// A JSON string literal (or `null`): clipped, with control, format and separator characters as `\uXXXX`.
    static func string(_ value: String?) -> String {
        guard let value else { return "null" }
        var text = "\""
        for scalar in clipped(value) {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            default:
                if isUnsafe(scalar) {
                    // Every unsafe scalar is in the Basic Multilingual Plane except the tag characters (U+E0000…),
                    // written as a surrogate pair.
                    for unit in String(scalar).utf16 {
                        let hex = String(unit, radix: 16)
                        text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                    }
                } else {
                    text.unicodeScalars.append(scalar)
                }
            }
        }
        return text + (value.unicodeScalars.count > fieldLimit ? "…" : "") + "\""
    }

    private static func clipped(_ value: String) -> String.UnicodeScalarView.SubSequence {
        value.unicodeScalars.prefix(fieldLimit)
    }

    /// Characters a terminal acts on or that change how a line reads: C0 and C1 controls, DEL, format characters
    /// (bidirectional overrides and isolates, zero-width characters, tags), line and paragraph separators.
    static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned: true
        default: false
        }
    }
}

extension String {
    fileprivate func padding(toLength length: Int) -> String {
        count >= length ? self : self + String(repeating: " ", count: length - count)
    }
}

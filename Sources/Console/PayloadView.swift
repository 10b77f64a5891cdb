import Crypto
import Foundation
import Fulfilment
import Gamebase
import Lookup
import Wire

/// A dead-lettered record's value as the console shows it, failing closed: a JSON value (at most ``maxJSONBytes``,
/// nested at most ``maxDepth``) pretty-printed with the value of every key naming a token, secret, password or
/// authorization hidden — a purchase token as the short hash the ledger shows, anything else not at all — and every
/// string that itself holds such a key masked the same way when it is JSON, withheld when it is not. A value that is no
/// JSON is shown as text only when nothing in it names a hidden field; otherwise only its size. At most
/// ``maxShownBytes`` are shown.
enum PayloadView {
    static let maxShownBytes = 16_384
    /// Larger values are not parsed: their pretty form could be many times their size.
    static let maxJSONBytes = 65_536
    static let maxDepth = 32

    /// Words of keys whose values are never shown (compared lower-cased, by containment: `purchaseToken`, …).
    static let hiddenWords = ["token", "secret", "password", "authorization"]

    struct View: Sendable {
        var text: String
        var json: Bool
        var truncated: Bool
        /// Why nothing of it is shown, when nothing is.
        var withheld: String?
    }

    static func view(_ value: [UInt8]) -> View {
        if value.count <= maxJSONBytes, let object = parse(Data(value)), depth(object) <= maxDepth,
            let data = try? JSONSerialization.data(
                withJSONObject: masked(object, depth: 0),
                options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        {
            return View(text: shown(Array(data)), json: true, truncated: data.count > maxShownBytes)
        }
        let text = String(decoding: value, as: UTF8.self)
        if namesHiddenField(text) {
            return View(
                text: "", json: false, truncated: false,
                withheld:
                    "it is no JSON that can be masked (or larger than \(maxJSONBytes) bytes, or nested deeper than "
                    + "\(maxDepth)) and it names a token, secret or password field")
        }
        return View(text: shown(value), json: false, truncated: value.count > maxShownBytes)
    }

    /// The first ``maxShownBytes`` bytes as text, cut before a character rather than inside one.
    static func shown(_ bytes: [UInt8]) -> String {
        var end = min(bytes.count, maxShownBytes)
        // A UTF-8 continuation byte (10xxxxxx) is inside a character: step back to where one starts.
        while end < bytes.count, end > 0, bytes[end] & 0xC0 == 0x80 { end -= 1 }
        return String(decoding: bytes[..<end], as: UTF8.self)
    }

    static func parse(_ data: Data) -> Any? {
        guard let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) else {
            return nil
        }
        return object is [String: Any] || object is [Any] ? object : nil
    }

    static func depth(_ node: Any) -> Int {
        switch node {
        case let object as [String: Any]: 1 + (object.values.map(depth).max() ?? 0)
        case let array as [Any]: 1 + (array.map(depth).max() ?? 0)
        default: 0
        }
    }

    static func isHidden(_ key: String) -> Bool {
        let lower = key.lowercased()
        return hiddenWords.contains { lower.contains($0) }
    }

    /// Whether text names a hidden field anywhere, `\u` escapes decoded first (`purchase\u0054oken`).
    static func namesHiddenField(_ text: String) -> Bool {
        var decoded = text
        if text.contains("\\u"), let escapes = try? NSRegularExpression(pattern: "\\\\u([0-9a-fA-F]{4})") {
            var out = ""
            var last = text.startIndex
            for match in escapes.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                guard let whole = Range(match.range, in: text), let hex = Range(match.range(at: 1), in: text),
                    let code = UInt32(text[hex], radix: 16), let scalar = Unicode.Scalar(code)
                else { continue }
                out += text[last..<whole.lowerBound]
                out.unicodeScalars.append(scalar)
                last = whole.upperBound
            }
            decoded = out + text[last...]
        }
        return isHidden(decoded)
    }

    static func masked(_ node: Any, depth: Int) -> Any {
        switch node {
        case let object as [String: Any]:
            var out: [String: Any] = [:]
            for (key, value) in object {
                out[key] = isHidden(key) ? hidden(value, key: key) : masked(value, depth: depth + 1)
            }
            return out
        case let array as [Any]:
            return array.map { masked($0, depth: depth + 1) }
        case let text as String where namesHiddenField(text):
            // A string holding a token-like field: JSON within it is masked the same way, anything else withheld.
            if depth < maxDepth, text.utf8.count <= maxJSONBytes, let inner = parse(Data(text.utf8)),
                Self.depth(inner) + depth <= maxDepth,
                let data = try? JSONSerialization.data(
                    withJSONObject: masked(inner, depth: depth + 1), options: [.sortedKeys, .withoutEscapingSlashes])
            {
                return String(decoding: data, as: UTF8.self)
            }
            return "<withheld: \(text.utf8.count) bytes naming a token, secret or password field>"
        default:
            return node
        }
    }

    /// A purchase token as the ledger's short hash of it (to match `find`'s token hash); any other hidden value not
    /// at all (a short password's hash could be looked up).
    static func hidden(_ value: Any, key: String) -> String {
        guard key.lowercased().contains("token"), let text = value as? String else { return "<hidden>" }
        return "<hidden, sha256 \(PurchaseTimeline.shortHash(SHA256.hex(text)))>"
    }
}

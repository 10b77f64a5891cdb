import Foundation
import Lookup

/// Text made safe for HTML: markup characters escaped, and the control and format characters that make a line read
/// other than it is (a hostile userId's bidi override) shown as escapes, as `find` shows them on a terminal.
enum HTML {
    static func escape(_ text: String) -> String {
        let printable = FindTextRenderer.printable(text)
        var out = ""
        out.reserveCapacity(printable.utf8.count)
        for character in printable {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }

    /// A query-string value: everything but unreserved characters percent-encoded.
    static func query(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    /// `path?name=value…`, every value percent-encoded.
    static func url(_ path: String, _ parameters: [(name: String, value: String)] = []) -> String {
        let query = parameters.map { "\($0.name)=\(Self.query($0.value))" }.joined(separator: "&")
        return query.isEmpty ? path : "\(path)?\(query)"
    }

    /// ``url(_:_:)`` escaped for an attribute.
    static func link(_ path: String, _ parameters: [(name: String, value: String)] = []) -> String {
        escape(url(path, parameters))
    }

    /// Text for a `<pre>`: as ``escape(_:)``, its line breaks kept.
    static func escapeBlock(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { escape(String($0)) }.joined(separator: "\n")
    }
}

import Crypto
import Foundation

/// A dead-lettered record's value as the console shows it: a JSON object pretty-printed with every token, secret and
/// password replaced by a short hash of it (so two records can still be told apart); anything else as text with its
/// invisible characters escaped, tokens after a `purchaseToken` key masked all the same. At most ``maxShownBytes``.
enum PayloadView {
    static let maxShownBytes = 16_384

    /// Keys whose values are never shown (compared lower-cased, by containment: `purchaseToken`, `accessToken`, …).
    static let hiddenKeys = ["token", "secret", "password", "authorization"]

    static func text(_ value: [UInt8]) -> (text: String, json: Bool, truncated: Bool) {
        if let object = try? JSONSerialization.jsonObject(with: Data(value), options: [.fragmentsAllowed]),
            object is [String: Any] || object is [Any],
            let data = try? JSONSerialization.data(
                withJSONObject: masked(object), options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        {
            let text = String(decoding: data, as: UTF8.self)
            return (String(text.utf8.prefix(maxShownBytes)) ?? text, true, data.count > maxShownBytes)
        }
        let shown = String(decoding: value.prefix(maxShownBytes), as: UTF8.self)
        return (maskedText(shown), false, value.count > maxShownBytes)
    }

    static func masked(_ node: Any) -> Any {
        switch node {
        case let object as [String: Any]:
            var out: [String: Any] = [:]
            for (key, value) in object {
                let lower = key.lowercased()
                if hiddenKeys.contains(where: { lower.contains($0) }) {
                    out[key] = hidden(value)
                } else {
                    out[key] = masked(value)
                }
            }
            return out
        case let array as [Any]:
            return array.map(masked)
        default:
            return node
        }
    }

    static func hidden(_ value: Any) -> String {
        let text = (value as? String) ?? "\(value)"
        let digest = SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
        return "<hidden, sha256 \(digest.prefix(12))>"
    }

    /// Text that is no JSON (a malformed record): the value after each hidden key, up to its closing quote, masked.
    static func maskedText(_ text: String) -> String {
        var out = text
        for key in ["purchaseToken", "accessToken", "token", "secret", "password"] {
            let pattern = "(\"[^\"]*\(key)[^\"]*\"\\s*:\\s*\")([^\"]*)"
            guard let expression = try? NSRegularExpression(pattern: pattern, options: [.caseInsensitive]) else {
                continue
            }
            var result = ""
            var last = out.startIndex
            for match in expression.matches(in: out, range: NSRange(out.startIndex..., in: out)) {
                guard let whole = Range(match.range, in: out), let head = Range(match.range(at: 1), in: out),
                    let secret = Range(match.range(at: 2), in: out)
                else { continue }
                result += out[last..<whole.lowerBound] + out[head] + hidden(String(out[secret]))
                last = whole.upperBound
            }
            out = result + out[last...]
        }
        return out
    }
}

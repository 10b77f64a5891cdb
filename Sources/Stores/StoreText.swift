import Foundation
import Wire

/// The stores' text as the worker keeps and shows it.
enum StoreText {
    /// The latest store time believed, in milliseconds since 1970: the last RFC 3339 can write.
    static let latestMillis = RFC3339.maximumMilliseconds

    /// A store time in milliseconds since 1970, when it is one the worker believes (after 1970, before 10000).
    static func date(millis: Int64) -> Date? {
        guard millis > 0, millis <= latestMillis else { return nil }
        return Date(timeIntervalSince1970: Double(millis) / 1_000)
    }

    /// Whether `text` is fit for ids and logs: 1 to `limit` UTF-8 bytes, no white space at its ends, no control
    /// characters.
    static func isPlainIdentifier(_ text: String, limit: Int = 256) -> Bool {
        !text.isEmpty && text.utf8.count <= limit && text.trimmingCharacters(in: .whitespacesAndNewlines) == text
            && !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
    }

    /// Text from outside fit for an error: at most 64 characters (``OutsideText/printable(_:limit:)``).
    static func printable(_ text: String) -> String { OutsideText.printable(text, limit: 64) }
}

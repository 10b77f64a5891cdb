import Foundation

/// Encodings shared by both stores.
enum LedgerCoding {
    static func encodeHeaders(_ headers: [EventHeader]) -> String {
        (try? String(decoding: JSONEncoder().encode(headers), as: UTF8.self)) ?? "[]"
    }

    static func decodeHeaders(_ text: String) -> [EventHeader] {
        (try? JSONDecoder().decode([EventHeader].self, from: Data(text.utf8))) ?? []
    }
}

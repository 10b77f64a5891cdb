import Foundation

enum UUIDString {
    static func random() -> String { UUID().uuidString.lowercased() }
}

import Foundation

/// A secret kept in a file of its own (a mounted Kubernetes secret, a systemd credential): its text without
/// surrounding whitespace, read only up to a bound — a path pointed at a device or a huge file is refused, not read
/// whole at start.
public enum SecretFile {
    public enum Problem: Error, Sendable, Equatable {
        case unreadable
        case tooLarge(maxBytes: Int)
        case empty

        /// What is wrong with the file at `path`, never its content.
        public func describe(_ path: String) -> String {
            switch self {
            case .unreadable: "cannot read \(path)"
            case .tooLarge(let maxBytes): "\(path) holds more than \(maxBytes) bytes: no secret is that long"
            case .empty: "\(path) is empty"
            }
        }
    }

    public static func read(_ path: String, maxBytes: Int = 4_096) -> Result<String, Problem> {
        guard let handle = FileHandle(forReadingAtPath: path) else { return .failure(.unreadable) }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: maxBytes + 1) else { return .failure(.unreadable) }
        guard data.count <= maxBytes else { return .failure(.tooLarge(maxBytes: maxBytes)) }
        guard let text = String(data: data, encoding: .utf8) else { return .failure(.unreadable) }
        let secret = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return secret.isEmpty ? .failure(.empty) : .success(secret)
    }
}

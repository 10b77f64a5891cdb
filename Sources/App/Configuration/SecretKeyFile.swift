import Engine
import Foundation
import Fulfilment
import Gamebase
import GamebaseHTTP
import Synchronization

/// `gamebase.secret_key_file`: the secret key in a file (a mounted Kubernetes secret, a systemd credential).
///
/// A Kubernetes secret update replaces the mounted file in place, so ``changedKey()`` reads it again and tells
/// whether the key changed since the last read.
public final class SecretKeyFile: Sendable {
    public let path: String
    private let lastKey = Mutex<String?>(nil)

    public init(path: String) {
        self.path = path
    }

    /// Reads the key: the file's text without surrounding whitespace.
    /// - Throws: ``ConfigurationError`` when the file cannot be read or is empty (never quoting its content).
    public func read() throws -> Secret {
        switch SecretFile.read(path) {
        case .success(let key):
            lastKey.withLock { $0 = key }
            return Secret(key)
        case .failure(let problem):
            throw ConfigurationError(key: "gamebase.secret_key_file", problem: problem.describe(path))
        }
    }

    /// The key if the file now holds another one than at the last read; `nil` when it is unchanged or unreadable.
    public func changedKey() -> Secret? {
        guard case .success(let key) = SecretFile.read(path) else { return nil }
        let changed = lastKey.withLock { last -> Bool in
            defer { last = key }
            return last != key
        }
        return changed ? Secret(key) : nil
    }
}

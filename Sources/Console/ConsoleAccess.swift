import Crypto
import Foundation
import Fulfilment

/// Who may read the console: anyone who reaches a loopback listener, or the holder of the bearer token from
/// `console.token_file`.
///
/// The token is kept only as its SHA-256 digest and a candidate is compared digest to digest (swift-crypto compares
/// digests in constant time), so neither the comparison's time nor a memory dump gives it away. Browsers send it as
/// the password of HTTP Basic authentication (any user name), which they prompt for on a 401; other clients as
/// `Authorization: Bearer <token>`.
public struct ConsoleAccess: Sendable {
    private let digest: SHA256.Digest?

    /// No token: the listener is on loopback and open to whoever reaches it.
    public static let loopbackOnly = ConsoleAccess(digest: nil)

    private init(digest: SHA256.Digest?) {
        self.digest = digest
    }

    /// Requires `token` (at least ``minimumTokenBytes`` bytes, no spaces inside).
    public init(token: String) {
        digest = SHA256.hash(data: Data(token.utf8))
    }

    /// Shorter tokens are refused: they could be guessed.
    public static let minimumTokenBytes = 16
    /// Longer ones too.
    public static let maximumTokenBytes = 1_024

    public var requiresToken: Bool { digest != nil }

    /// Whether a request with this `Authorization` header may read.
    public func allows(authorization: String?) -> Bool {
        guard let digest else { return true }
        guard let authorization, let candidate = Self.credential(authorization) else { return false }
        return SHA256.hash(data: Data(candidate.utf8)) == digest
    }

    /// The token of `Bearer <token>`, or the password of `Basic base64(user:password)`.
    static func credential(_ header: String) -> String? {
        // Bounded: a header of megabytes is no credential.
        guard header.utf8.count <= 4_096 else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2 else { return nil }
        let value = parts[1].trimmingCharacters(in: .whitespaces)
        switch parts[0].lowercased() {
        case "bearer":
            return value
        case "basic":
            guard let data = Data(base64Encoded: value), let text = String(data: data, encoding: .utf8),
                let colon = text.firstIndex(of: ":")
            else { return nil }
            return String(text[text.index(after: colon)...])
        default:
            return nil
        }
    }

    /// Reads the token of `console.token_file`: the file's text without surrounding whitespace.
    /// - Throws: ``ConsoleError`` naming the file (never its content) when it cannot be read, is empty, too short or
    ///   holds whitespace inside.
    public static func token(fromFile path: String) throws -> String {
        // Longer than a browser's Basic header could carry (``credential(_:)`` reads 4 KB at most): no login could use it.
        let token: String
        switch SecretFile.read(path, maxBytes: maximumTokenBytes) {
        case .success(let read): token = read
        case .failure(let problem): throw ConsoleError(.tokenFile, problem.describe(path))
        }
        guard token.utf8.count >= minimumTokenBytes else {
            throw ConsoleError(.tokenFile, "\(path) holds a token shorter than \(minimumTokenBytes) bytes")
        }
        guard !token.contains(where: \.isWhitespace) else {
            throw ConsoleError(.tokenFile, "\(path) holds whitespace inside the token")
        }
        return token
    }
}

/// A console that cannot be served as configured; names the key or the file, never a token.
public struct ConsoleError: Error, CustomStringConvertible, Sendable {
    enum Code: Sendable {
        /// `console.token_file` is missing where it is required, or holds no usable token.
        case tokenFile
    }

    let code: Code
    public let message: String
    public let file: String
    public let line: Int

    init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    /// The configuration key at fault.
    public var key: String {
        switch code {
        case .tokenFile: "console.token_file"
        }
    }

    public var description: String { "\(key): \(message)" }
}

import Foundation

/// `console.*`: where the operator console listens, who may read it, and what it shows.
public struct ConsoleConfiguration: Sendable {
    /// `console.port`; 0 turns the console off.
    public var port: Int
    /// `console.address`: loopback unless a token is required (``ConsoleAccess``).
    public var address: String
    public var access: ConsoleAccess
    /// `console.environment`: the banner on every page ("production", "staging"); empty: "unnamed".
    public var environment: String
    /// `console.show_payloads`: a dead-lettered record's value can be opened (read from the dead-letter topic, tokens
    /// masked); off, the console shows its size only.
    public var showPayloads: Bool
    /// Every ledger read the console makes ends within this, answered or not.
    public var ledgerReadTimeout: Duration = .seconds(5)
    /// An "ask Gamebase now" ends within this.
    public var gamebaseTimeout: Duration = .seconds(20)
    /// Two asks of Gamebase start at least this far apart (they share the worker's connections and the app's quota).
    public var gamebaseAskInterval: Duration = .seconds(1)
    /// The overview reloads itself this often.
    public var refreshSeconds = 5

    public init(
        port: Int = 8081, address: String = "127.0.0.1", access: ConsoleAccess = .loopbackOnly,
        environment: String = "",
        showPayloads: Bool = false
    ) {
        self.port = port
        self.address = address
        self.access = access
        self.environment = environment
        self.showPayloads = showPayloads
    }

    /// The console is off.
    public static let off = ConsoleConfiguration(port: 0)

    public var isEnabled: Bool { port != 0 }

    /// Whether `address` only ever accepts connections from this host: 127.0.0.0/8, ::1 or `localhost`.
    public static func isLoopback(_ address: String) -> Bool {
        let address = address.lowercased()
        if address == "localhost" || address == "::1" || address == "[::1]" { return true }
        let octets = address.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4, octets[0] == "127" else { return false }
        return octets.allSatisfy { octet in octet.count <= 3 && UInt8(octet) != nil }
    }

    /// Refuses a listener beyond loopback without a token.
    /// - Throws: ``ConsoleError`` naming `console.token_file`.
    public func validate() throws {
        guard isEnabled else { return }
        if !Self.isLoopback(address), !access.requiresToken {
            throw ConsoleError(
                .tokenFile,
                "required when console.address (\(address)) is not loopback: anyone who reaches the port would read "
                    + "purchase data; set console.token_file to a file holding a bearer token, or listen on 127.0.0.1")
        }
    }
}

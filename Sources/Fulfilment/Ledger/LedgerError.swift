/// An error from the ledger. `description` never contains purchase tokens or database passwords.
public struct LedgerError: Error, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidURL = "invalid_url"
            case configuration, unavailable, unwritable, migration, query, conflict
            case missingTable = "missing_table"
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// `ledger.url` is not `sqlite:///path` or `postgres://…`.
        public static let invalidURL = Code(.invalidURL)
        /// The database answers but cannot be used as configured: its certificate does not verify, it refuses the
        /// credentials, the database does not exist, or it refuses TLS that `ledger.url` requires. Waiting does not
        /// help; `ledger.url` (or the server) must change.
        public static let configuration = Code(.configuration)
        /// The database cannot be reached or opened.
        public static let unavailable = Code(.unavailable)
        /// The database answers but cannot write: its disk is full or read-only, its storage fails I/O, it is out of
        /// memory, or the server takes no writes (a standby, `default_transaction_read_only`); for SQLite also a file
        /// system below `ledger.min_free_bytes`. An outage of the ledger, never a purchase's fault: purchases wait
        /// until a probe writes again. The message starts with the condition (`disk full (/path)`), what readiness
        /// says.
        public static let unwritable = Code(.unwritable)
        public static let migration = Code(.migration)
        public static let query = Code(.query)
        /// A guarded update found the row in another state.
        public static let conflict = Code(.conflict)
        /// A table or function this version reads is not in the ledger: one an older version migrated, read by a
        /// command that does not migrate (`find`, the console of an instance started before the migration).
        public static let missingTable = Code(.missingTable)
        public var description: String { base.rawValue }
    }

    public let code: Code
    public let message: String
    public let file: String
    public let line: UInt

    public init(code: Code, message: String, file: String = #fileID, line: UInt = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    /// Database errors are worth retrying (the database may be back); a bad URL, a configuration the database refuses
    /// or a failed migration is not.
    public var isRetryable: Bool { code == .unavailable || code == .unwritable || code == .query }

    public var description: String { "LedgerError(\(code)): \(message)" }
}

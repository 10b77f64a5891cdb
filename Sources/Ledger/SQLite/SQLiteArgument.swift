import GRDB
import GRDBSQLite

/// A value bound to a statement's parameter through SQLite's C API (see ``GRDB/Statement/run(_:in:row:)``).
enum SQLiteArgument {
    case text(String)
    case integer(Int64)
    case blob([UInt8])
    case null

    init(_ text: String?) { self = text.map { .text($0) } ?? .null }
    init(_ integer: Int64?) { self = integer.map { .integer($0) } ?? .null }
    init(_ integer: Int?) { self = integer.map { .integer(Int64($0)) } ?? .null }
    init(_ blob: [UInt8]?) { self = blob.map { .blob($0) } ?? .null }
    init(_ flag: Bool) { self = .integer(flag ? 1 : 0) }
}

extension Statement {
    /// Runs this statement to its end with `arguments` bound through SQLite's C API: texts and blobs are bound in
    /// place for the length of the run, never copied, and no `StatementArguments` is built (for the hot path's
    /// statements, GRDB's arguments cost a dozen allocations and more per row). `row` sees each result row.
    ///
    /// Only for statements nothing else runs: GRDB's own record of this statement's arguments is left as it was.
    /// GRDB's per-statement bookkeeping is skipped too: transaction observers and `ValueObservation` would not see
    /// these writes (the project uses neither; a write runs inside GRDB's own transaction, which checks for an
    /// aborted one). The statement is reset and its bindings cleared before it returns, so no pointer outlives the
    /// call.
    func run(_ arguments: [SQLiteArgument], in db: Database, row: (SQLiteStatement) -> Void = { _ in }) throws {
        let statement = sqliteStatement
        sqlite3_reset(statement)  // the code of an earlier failed step, already reported then
        sqlite3_clear_bindings(statement)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        // GRDB refuses to run a write when an error has rolled the transaction back under it (SQLITE_FULL, an I/O
        // error) and the caller went on; so does this, instead of committing the write on its own, without the
        // rest of its transaction.
        if !isReadonly, sqlite3_get_autocommit(db.sqliteConnection) != 0 {
            throw DatabaseError(
                resultCode: .SQLITE_ABORT, message: "a write outside a transaction (was it rolled back?)", sql: sql)
        }
        guard arguments.count == Int(sqlite3_bind_parameter_count(statement)) else {
            throw DatabaseError(
                resultCode: .SQLITE_MISUSE,
                message: "\(arguments.count) arguments for \(sqlite3_bind_parameter_count(statement)) parameters",
                sql: sql)
        }
        try bind(arguments, from: 0, in: db, row: row)
    }

    /// Binds `arguments[index...]`, each inside the closure that keeps its bytes alive, then steps.
    private func bind(_ arguments: [SQLiteArgument], from index: Int, in db: Database, row: (SQLiteStatement) -> Void)
        throws
    {
        guard index < arguments.count else { return try step(in: db, row: row) }
        let statement = sqliteStatement
        let position = CInt(index + 1)
        let code: CInt
        switch arguments[index] {
        case .null:
            code = sqlite3_bind_null(statement, position)
        case .integer(let value):
            code = sqlite3_bind_int64(statement, position, value)
        case .text(var text):
            var result: CInt = SQLITE_OK
            try text.withUTF8 { bytes in
                // Up to the first NUL, as GRDB binds a string (its length -1), so both bindings store the same text.
                let length = bytes.firstIndex(of: 0) ?? bytes.count
                guard let length32 = CInt(exactly: length) else {
                    result = SQLITE_TOOBIG
                    return
                }
                // An empty buffer may have no address, and a null pointer would bind NULL: bind "" itself, copied.
                result =
                    length == 0
                    ? sqlite3_bind_text(statement, position, "", 0, Self.transient)
                    : bytes.withMemoryRebound(to: CChar.self) {
                        sqlite3_bind_text(statement, position, $0.baseAddress, length32, nil)
                    }
                guard result == SQLITE_OK else { return }
                try bind(arguments, from: index + 1, in: db, row: row)
            }
            guard result == SQLITE_OK else { throw bindingFailure(result, db) }
            return
        case .blob(let blob):
            var result: CInt = SQLITE_OK
            try blob.withUnsafeBytes { bytes in
                guard let count32 = CInt(exactly: bytes.count) else {
                    result = SQLITE_TOOBIG
                    return
                }
                result =
                    bytes.isEmpty
                    ? sqlite3_bind_zeroblob(statement, position, 0)
                    : sqlite3_bind_blob(statement, position, bytes.baseAddress, count32, nil)
                guard result == SQLITE_OK else { return }
                try bind(arguments, from: index + 1, in: db, row: row)
            }
            guard result == SQLITE_OK else { throw bindingFailure(result, db) }
            return
        }
        guard code == SQLITE_OK else { throw bindingFailure(code, db) }
        try bind(arguments, from: index + 1, in: db, row: row)
    }

    /// SQLite copies a value bound with this destructor.
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

    private func step(in db: Database, row: (SQLiteStatement) -> Void) throws {
        while true {
            let code = sqlite3_step(sqliteStatement)
            switch code {
            case SQLITE_DONE: return
            case SQLITE_ROW: row(sqliteStatement)
            default: throw DatabaseError(resultCode: ResultCode(rawValue: code), message: db.lastErrorMessage, sql: sql)
            }
        }
    }

    private func bindingFailure(_ code: CInt, _ db: Database) -> DatabaseError {
        DatabaseError(resultCode: ResultCode(rawValue: code), message: db.lastErrorMessage, sql: sql)
    }
}

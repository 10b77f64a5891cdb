/// How the ledger monitor tells a ledger that can take the flow's writes from one that cannot.
///
/// Both throw or return ``LedgerError``; code `unwritable` when the ledger answers but cannot write.
public protocol LedgerProbe: Sendable {
    /// One small write the flow's writes depend on as much (a mark row, and for SQLite a checkpoint that grows the
    /// file): it fails while the disk is full or read-only, the storage fails I/O or the server takes no writes —
    /// where a read would still answer. Also fails, for a ledger on this host's disk, below its free-space floor.
    func probeWrite() async throws

    /// Without a database call, cheap enough for every second: why the ledger is about to stop writing (its file
    /// system below `ledger.min_free_bytes`), or `nil`. Always `nil` for a ledger on another host.
    func storageShortfall() -> LedgerError?
}

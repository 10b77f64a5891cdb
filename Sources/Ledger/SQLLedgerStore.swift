import Fulfilment

/// What both SQL stores are: every role of the ledger, the synthetic fill of `iap-dev bench scale`, and their own
/// lifecycle. Users take the roles (``roles``); what a store can do is in this type, never found by a cast.
public protocol SQLLedgerStore: PurchaseLedger, SweepLedger, LedgerProbe, ReconciliationLedger, RetentionLedger,
    HistoryLedger, AdminLedger, RefundLedger, LedgerFilling
{
    /// Runs the named migrations that have not run yet.
    func migrate() async throws

    /// Releases connections. The store must not be used afterwards.
    func close() async throws
}

extension SQLLedgerStore {
    /// The store's roles, in one value.
    public var roles: LedgerRoles { LedgerRoles(self) }
}

/// The ledger as its users see it: one role each. A store hands them out in one value (``init(_:)``), so what a
/// backend supports is in its type, never found by a cast; a test replaces a role with a double of that role alone.
public struct LedgerRoles: Sendable {
    /// The consume flow's (through ``FlowLedger``).
    public var purchases: any PurchaseLedger
    /// The sweeper's.
    public var sweep: any SweepLedger
    /// The ledger monitor's: whether the ledger can write.
    public var probe: any LedgerProbe
    /// The reconciler's.
    public var reconciliation: any ReconciliationLedger
    /// The pruner's.
    public var retention: any RetentionLedger
    /// `find` and the console's.
    public var history: any HistoryLedger
    /// Operators' commands and `reprocess`'s.
    public var admin: any AdminLedger
    /// The stores' refunds.
    public var refunds: any RefundLedger

    public init(
        purchases: any PurchaseLedger, sweep: any SweepLedger, probe: any LedgerProbe,
        reconciliation: any ReconciliationLedger, retention: any RetentionLedger, history: any HistoryLedger,
        admin: any AdminLedger, refunds: any RefundLedger
    ) {
        self.purchases = purchases
        self.sweep = sweep
        self.probe = probe
        self.reconciliation = reconciliation
        self.retention = retention
        self.history = history
        self.admin = admin
        self.refunds = refunds
    }

    /// Every role from one store that plays them all.
    public init(
        _ store: some PurchaseLedger & SweepLedger & LedgerProbe & ReconciliationLedger & RetentionLedger
            & HistoryLedger & AdminLedger & RefundLedger
    ) {
        self.init(
            purchases: store, sweep: store, probe: store, reconciliation: store, retention: store, history: store,
            admin: store, refunds: store)
    }
}

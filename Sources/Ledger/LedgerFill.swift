import Foundation

/// Synthetic earlier purchases for `iap-dev bench scale`: a ledger as a studio's would look after N purchases at a
/// million a day, with retention keeping it in its steady state.
///
/// Purchase `i` (0 is the newest) was granted `(i + 1) × spacing` before `now`, by user `fill-user-(i mod users)`,
/// and consumed; its item-granted event is in the outbox (published) only while younger than the outbox retention.
/// Every 20th purchase also left a rejection: confirmed (`not_consumable`) or, within the last day, unconfirmed
/// (`invalid_purchase`) every other time.
public struct LedgerFill: Sendable {
    public var now: Date
    /// Between two purchases: a million a day.
    public var spacingMilliseconds: Int64 = 86
    public var users: Int
    public var outboxHours = 72
    public var unconfirmedHours = 24
    /// Bytes of each event's payload (an item-granted CloudEvent is about 600).
    public var payloadBytes = 600

    public init(now: Date, users: Int) {
        self.now = now
        self.users = max(1, users)
    }

    /// Purchases younger than `hours`: those whose index is below the answer.
    func count(within hours: Int) -> Int64 { Int64(hours) * 3_600_000 / spacingMilliseconds }
}

/// A store that can be filled with ``LedgerFill``'s purchases.
public protocol LedgerFilling: Sendable {
    /// Writes purchases `range` (indices into the fill), in statements of a few hundred thousand rows.
    func fill(_ fill: LedgerFill, purchases range: Range<Int>) async throws
    /// Refreshes the planner's statistics (after a fill).
    func analyze() async throws
    /// Whether the database holds no table at all where this connection looks (PostgreSQL: every schema of the
    /// search path, so an empty schema named after the role does not hide a ledger in `public`), so filling it can
    /// touch nobody's purchases. Read before any migration: a ledger a daemon uses (even one migrated and still
    /// empty) answers `false`.
    func holdsNoTables() async throws -> Bool
}

import Foundation
import Fulfilment
import GRDB
import Wire

extension SQLiteLedgerStore {
    public func fill(_ fill: LedgerFill, purchases range: Range<Int>) async throws {
        let now = fill.now.epochMilliseconds
        let spacing = fill.spacingMilliseconds
        let headers = LedgerCoding.encodeHeaders([])
        for start in stride(from: range.lowerBound, to: range.upperBound, by: 200_000) {
            let end = min(start + 200_000, range.upperBound)
            try await writeAlone { db in
                let series =
                    "WITH RECURSIVE s(i) AS (SELECT \(start) UNION ALL SELECT i + 1 FROM s WHERE i + 1 < \(end))"
                let at = "(\(now) - (i + 1) * \(spacing))"
                try db.execute(
                    sql: """
                        \(series)
                        INSERT INTO grants (\(LedgerSchema.grantColumns))
                        SELECT 'fill-' || i, 'fill-user-' || (i % \(fill.users)), 'gem_pack_100', printf('tok-fill-%0120d', i),
                            1000, 'GG', 'CONSUMABLE', '1200', 'KRW', 'GPA.fill-' || i, 0, '2024-05-13T10:20:30+09:00', NULL,
                            'consumed', \(at), \(at) + 100, 1, 0, \(at) + 50, 'purchase.completed', i % 12, i, 'message',
                            \(at) - 20
                        FROM s
                        """)
                try db.execute(
                    sql: """
                        \(series)
                        INSERT INTO outbox (\(LedgerSchema.outboxColumns))
                        SELECT 'fill-' || i || ':item-granted', 'fill-' || i, 'iap.item-granted', CAST('fill-user-' || (i % \(fill.users)) AS BLOB),
                            ?, zeroblob(\(fill.payloadBytes)), \(at) + 10, \(at) + 50
                        FROM s WHERE i < \(fill.count(within: fill.outboxHours))
                        """, arguments: [headers])
                try db.execute(
                    sql: """
                        \(series)
                        INSERT INTO rejections (\(LedgerSchema.rejectionColumns))
                        SELECT 'fill-r' || i, 'fill-user-' || (i % \(fill.users)), printf('%064d', i),
                            CASE WHEN i < \(fill.count(within: fill.unconfirmedHours)) AND i % 40 = 0 THEN 'invalid_purchase'
                                ELSE 'not_consumable' END,
                            1, 'rejected', NULL, 'fill-r' || i || ':consume-failed', \(at) + 30, 'purchase.completed', i % 12, i,
                            \(at) - 20, NULL, NULL, NULL, NULL, NULL
                        FROM s WHERE i % 20 = 0
                        """)
            }
        }
    }

    public func analyze() async throws {
        try await writeAlone { db in try db.execute(sql: "ANALYZE") }
    }

    public func holdsNoTables() async throws -> Bool {
        try await read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master WHERE type = 'table'") == 0
        }
    }
}

import Foundation
import Fulfilment
import PostgresNIO
import Wire

extension PostgresLedgerStore {
    public func fill(_ fill: LedgerFill, purchases range: Range<Int>) async throws {
        let now = fill.now.epochMilliseconds
        let spacing = fill.spacingMilliseconds
        let headers = LedgerCoding.encodeHeaders([])
        let at = "(\(now) - (i + 1) * \(spacing))"
        for start in stride(from: range.lowerBound, to: range.upperBound, by: 250_000) {
            let end = min(start + 250_000, range.upperBound)
            let series = "generate_series(\(start)::bigint, \(end - 1)::bigint) AS i"
            try await wrap {
                try await client.query(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO grants (\(LedgerSchema.grantColumns))
                            SELECT 'fill-' || i, 'fill-user-' || (i % \(fill.users)), 'gem_pack_100', 'tok-fill-' || lpad(i::text, 120, '0'),
                                1000, 'GG', 'CONSUMABLE', '1200', 'KRW', 'GPA.fill-' || i, false, '2024-05-13T10:20:30+09:00', NULL,
                                'consumed', \(at), \(at) + 100, 1, 0, \(at) + 50, 'purchase.completed', (i % 12)::int, i, 'message',
                                \(at) - 20
                            FROM \(series)
                            """), logger: logger)
                try await client.query(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO outbox (\(LedgerSchema.outboxColumns))
                            SELECT 'fill-' || i || ':item-granted', 'fill-' || i, 'iap.item-granted',
                                convert_to('fill-user-' || (i % \(fill.users)), 'UTF8'), $1,
                                convert_to(repeat('x', \(fill.payloadBytes)), 'UTF8'), \(at) + 10, \(at) + 50
                            FROM \(series) WHERE i < \(fill.count(within: fill.outboxHours))
                            """,
                        binds: {
                            var b = PostgresBindings()
                            b.append(headers)
                            return b
                        }()), logger: logger)
                try await client.query(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO rejections (\(LedgerSchema.rejectionColumns))
                            SELECT 'fill-r' || i, 'fill-user-' || (i % \(fill.users)), lpad(i::text, 64, '0'),
                                CASE WHEN i < \(fill.count(within: fill.unconfirmedHours)) AND i % 40 = 0 THEN 'invalid_purchase'
                                    ELSE 'not_consumable' END,
                                1, 'rejected', NULL, 'fill-r' || i || ':consume-failed', \(at) + 30, 'purchase.completed',
                                (i % 12)::int, i, \(at) - 20, NULL, NULL, NULL, NULL, NULL
                            FROM \(series) WHERE i % 20 = 0
                            """), logger: logger)
            }
        }
    }

    public func analyze() async throws {
        try await wrap { try await client.query("ANALYZE", logger: logger) }
    }

    public func holdsNoTables() async throws -> Bool {
        try await wrap {
            var tables: Int64 = 0
            for try await count in try await client.query(
                "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = ANY (current_schemas(false))",
                logger: logger
            ).decode(Int64.self) {
                tables = count
            }
            return tables == 0
        }
    }
}

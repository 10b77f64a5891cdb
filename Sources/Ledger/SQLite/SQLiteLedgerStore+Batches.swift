import Foundation
import Fulfilment
import GRDB

/// Batches: one read, or one write transaction (shared with whatever else the group commit carries), for many
/// purchases. The statements are the single operations' own, cached; what a batch saves is the transaction, the
/// hop to GRDB's queue and the continuation per purchase.
extension SQLiteLedgerStore {
    public func lookup(_ keys: [RejectionKey]) async throws -> [LedgerLookup] {
        try await read { db in
            try keys.map { key in
                // Most lookups find nothing (a new purchase): one probe answers that without building two rows.
                let found = try Self.presence(key, db)
                return LedgerLookup(
                    grant: found.grant ? try Self.fetchGrant(key.paymentSeq, db) : nil,
                    rejection: found.rejection ? try Self.fetchRejection(key, db) : nil)
            }
        }
    }

    public func insertGrants(_ writes: [GrantWrite]) async throws -> [GrantInsertResult] {
        try await write { db in try writes.map { try Self.insertGrant($0.grant, $0.event, db) } }
    }

    public func insertRejections(_ writes: [RejectionWrite]) async throws -> [Bool] {
        try await write { db in try writes.map { try Self.insertRejection($0.rejection, $0.event, db) } }
    }

    public func recordConsumes(_ records: [ConsumeRecord]) async throws -> [Bool] {
        try await write { db in
            try records.map { record in
                if let id = record.publishedEventID { try Self.markPublished(id, at: record.at, db) }
                if record.consumed {
                    return try Self.markConsumed(
                        record.paymentSeq, resultCode: record.resultCode ?? 0, at: record.at, db)
                }
                try Self.recordConsumeFailure(record.paymentSeq, resultCode: record.resultCode, db)
                return false
            }
        }
    }

    public func markPublished(_ events: [PublishedEvent]) async throws {
        try await write { db in
            for event in events { try Self.markPublished(event.id, at: event.at, db) }
        }
    }
}

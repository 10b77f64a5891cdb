import Foundation
import Fulfilment

/// Finds purchases by any identifier and tells each one's story: one implementation behind `iap-worker find` and the
/// console.
///
/// Which kind an identifier is: an event id by its shape (`<paymentSeq>:item-granted`, `<paymentSeq>:consume-failed:…`,
/// `<topic>/<partition>/<offset>:consume-failed` for a malformed message); otherwise the first of paymentSeq, store
/// payment id and userId under which the ledger holds anything. A caller that knows says so.
public struct PurchaseFinder: Sendable {
    public let reader: any HistoryLedger
    /// The reconciler's grace, to say when a sighting will be taken.
    public var reconcileGrace: Duration?

    public init(reader: any HistoryLedger, reconcileGrace: Duration? = nil) {
        self.reader = reader
        self.reconcileGrace = reconcileGrace
    }

    /// The most purchases one store payment id is taken to name.
    static let paymentIdLimit = 50

    /// - Parameters:
    ///   - limit: for a userId, the page size (purchases newest first).
    ///   - before: for a userId, the page after this cursor (the ``FindResult/nextBefore`` of the page before, or a
    ///     time alone: the purchases that first appeared before it).
    /// - Throws: ``LedgerError`` when the ledger fails.
    public func find(_ id: String, as kind: IdentifierKind? = nil, before: PurchaseCursor? = nil, limit: Int = 20)
        async throws -> FindResult
    {
        let limit = max(1, min(limit, 1_000))
        if let kind { return try await find(id, kind, before: before, limit: limit) }
        if EventIdentifier(id) != nil { return try await find(id, .eventId, before: before, limit: limit) }
        for kind in [IdentifierKind.paymentSeq, .paymentId, .userId] {
            let result = try await find(id, kind, before: before, limit: limit)
            if !result.purchases.isEmpty { return result }
        }
        return FindResult(id: id, kind: nil, purchases: [])
    }

    func find(_ id: String, _ kind: IdentifierKind, before: PurchaseCursor?, limit: Int) async throws -> FindResult {
        switch kind {
        case .paymentSeq:
            return FindResult(id: id, kind: kind, purchases: try await timelines([id]))
        case .paymentId:
            return FindResult(
                id: id, kind: kind,
                purchases: try await timelines(try await reader.paymentSeqs(paymentId: id, limit: Self.paymentIdLimit)))
        case .userId:
            let page = try await reader.purchases(userId: id, before: before, limit: limit)
            let purchases = try await timelines(page.map(\.paymentSeq))
            return FindResult(
                id: id, kind: kind, purchases: purchases, nextBefore: page.count == limit ? page.last?.cursor : nil)
        case .eventId:
            switch EventIdentifier(id) {
            case .paymentSeq(let seq):
                return FindResult(id: id, kind: kind, purchases: try await timelines([seq]))
            case .malformed(let source):
                let letters = try await reader.deadLetters(original: source)
                if let seq = letters.lazy.compactMap(\.paymentSeq).first {
                    return FindResult(id: id, kind: kind, purchases: try await timelines([seq]))
                }
                let purchases =
                    letters.isEmpty ? [] : [PurchaseTimeline(PurchaseHistory(paymentSeq: nil, deadLetters: letters))]
                return FindResult(id: id, kind: kind, purchases: purchases)
            case nil:
                return FindResult(id: id, kind: kind, purchases: [])
            }
        }
    }

    /// The histories of `paymentSeqs` the ledger holds anything of, with their timelines.
    public func histories(_ paymentSeqs: [String]) async throws -> [PurchaseHistory] {
        var found: [PurchaseHistory] = []
        for seq in paymentSeqs {
            let history = try await reader.history(paymentSeq: seq)
            if !history.isEmpty { found.append(history) }
        }
        return found
    }

    func timelines(_ paymentSeqs: [String]) async throws -> [PurchaseTimeline] {
        try await histories(paymentSeqs).map { PurchaseTimeline($0, reconcileGrace: reconcileGrace) }
    }
}

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
    /// The stores' notifications, revocations and consumption answers, told in the purchases' timelines.
    public let refunds: (any RefundHistoryLedger)?
    /// The reconciler's grace, to say when a sighting will be taken.
    public var reconcileGrace: Duration?

    public init(reader: any HistoryLedger, refunds: (any RefundHistoryLedger)? = nil, reconcileGrace: Duration? = nil) {
        self.reader = reader
        self.refunds = refunds
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
        if let kind { return try await find(id, kind, before: before, limit: limit, explicit: true) }
        if EventIdentifier(id) != nil { return try await find(id, .eventId, before: before, limit: limit) }
        for kind in [IdentifierKind.paymentSeq, .paymentId, .userId, .notificationId] {
            let result = try await find(id, kind, before: before, limit: limit)
            if !result.purchases.isEmpty { return result }
        }
        return FindResult(id: id, kind: nil, purchases: [])
    }

    func find(_ id: String, _ kind: IdentifierKind, before: PurchaseCursor?, limit: Int, explicit: Bool = false)
        async throws -> FindResult
    {
        switch kind {
        case .paymentSeq:
            return FindResult(id: id, kind: kind, purchases: try await timelines([id]))
        case .paymentId:
            let purchases = try await timelines(
                try await reader.paymentSeqs(paymentId: id, limit: Self.paymentIdLimit))
            if !purchases.isEmpty { return FindResult(id: id, kind: kind, purchases: purchases) }
            // A refund of a payment the ledger never saw is kept, and found by the store's payment id.
            return FindResult(id: id, kind: kind, purchases: try await refundsAlone(paymentId: id))
        case .notificationId:
            guard let refunds else { return FindResult(id: id, kind: kind, purchases: []) }
            guard let record = try await refunds.notification(id: id) else {
                // Never believed: the records refused that claimed this id, each with why and where it came from. A
                // claim is the record's own word (anyone who can write to the topic chooses it), so an id tried under
                // every kind is looked for among them only when it has a notification id's shape.
                guard explicit || Self.hasNotificationIdShape(id) else {
                    return FindResult(id: id, kind: kind, purchases: [])
                }
                let refused = try await refunds.refusals(claimedId: id, limit: Self.paymentIdLimit)
                return FindResult(id: id, kind: kind, purchases: refused.map(PurchaseTimeline.init(refused:)))
            }
            guard let key = record.paymentKey else { return FindResult(id: id, kind: kind, purchases: []) }
            if let seq = record.paymentSeq {
                return FindResult(id: id, kind: kind, purchases: try await timelines([seq]))
            }
            let seqs = try await reader.paymentSeqs(paymentId: key.paymentId, limit: Self.paymentIdLimit)
            let purchases = try await timelines(seqs)
            return FindResult(
                id: id, kind: kind,
                purchases: purchases.isEmpty ? try await refundsAlone(paymentId: key.paymentId) : purchases)
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

    /// Whether `id` looks like a store's notification id: Apple's `notificationUUID` (8-4-4-4-12 hex digits) or the id
    /// the worker gives a Google notification (`google:` and 32 hex digits).
    static func hasNotificationIdShape(_ id: String) -> Bool {
        let hex = Set("0123456789abcdefABCDEF")
        if id.hasPrefix("google:") {
            let rest = id.dropFirst("google:".count)
            return rest.count == 32 && rest.allSatisfy(hex.contains)
        }
        let groups = id.split(separator: "-", omittingEmptySubsequences: false)
        return groups.map(\.count) == [8, 4, 4, 4, 12] && groups.allSatisfy { $0.allSatisfy(hex.contains) }
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
        var timelines: [PurchaseTimeline] = []
        for history in try await histories(paymentSeqs) {
            let timeline = PurchaseTimeline(history, reconcileGrace: reconcileGrace)
            timelines.append(timeline.adding(try await refunds(of: timeline, history: history)))
        }
        return timelines
    }

    /// What the ledger holds of the refunds of a purchase's payment (by its store code and store payment id).
    ///
    /// A ledger without the refund tables (one a version before refunds left, not migrated yet) has none:
    /// the purchase's own story is still told. Any other failure (the ledger down, a read past its deadline) fails the
    /// find, as it would for the purchase itself: a timeline never silently leaves out a refund it could not read.
    func refunds(of timeline: PurchaseTimeline, history: PurchaseHistory) async throws -> PurchaseTimeline.Refunds {
        do {
            return try await readRefunds(of: timeline, history: history)
        } catch let error as LedgerError where error.code == .missingTable {
            return PurchaseTimeline.Refunds()
        }
    }

    func readRefunds(of timeline: PurchaseTimeline, history: PurchaseHistory) async throws -> PurchaseTimeline.Refunds {
        guard let refunds else { return PurchaseTimeline.Refunds() }
        let market =
            history.grant?.marketId ?? history.rejections.lazy.compactMap(\.record.verdict?.marketId).first
        var found = PurchaseTimeline.Refunds()
        if let market, let paymentId = timeline.paymentId {
            found.notifications = try await refunds.notifications(
                paymentKey: StorePaymentKey(marketId: market, paymentId: paymentId))
        }
        // Only a grant can have been revoked: a rejected purchase's timeline asks nothing more.
        if history.grant != nil, let seq = timeline.paymentSeq {
            found.revocations = try await refunds.revocations(paymentSeq: seq)
        }
        for record in found.notifications where record.notification.kind == .consumptionRequest {
            if let answer = try await refunds.consumptionAnswer(notificationId: record.notification.notificationId) {
                found.answers.append(answer)
            }
        }
        return found
    }

    /// The refunds of a store payment id the ledger has no purchase of, under either store.
    func refundsAlone(paymentId: String) async throws -> [PurchaseTimeline] {
        guard let refunds else { return [] }
        var timelines: [PurchaseTimeline] = []
        for store in Store.allCases {
            let notifications = try await refunds.notifications(
                paymentKey: StorePaymentKey(marketId: store.marketId, paymentId: paymentId))
            guard !notifications.isEmpty else { continue }
            timelines.append(PurchaseTimeline(paymentId: paymentId, refunds: .init(notifications: notifications)))
        }
        return timelines
    }
}

import Foundation
import Fulfilment

/// What an identifier a player or a system holds is taken to be.
public enum IdentifierKind: String, Sendable, Hashable, CaseIterable, Codable {
    case paymentSeq = "payment_seq"
    case paymentId = "payment_id"
    case userId = "user_id"
    case eventId = "event_id"
}

/// What `find` found for one identifier.
public struct FindResult: Sendable, Hashable {
    public var id: String
    /// What the identifier was taken to be; `nil` when nothing was found under any kind.
    public var kind: IdentifierKind?
    public var purchases: [PurchaseTimeline]
    /// For a userId with more purchases than the page: the `--before` of the next page.
    public var nextBefore: Date?

    public init(id: String, kind: IdentifierKind?, purchases: [PurchaseTimeline], nextBefore: Date? = nil) {
        self.id = id
        self.kind = kind
        self.purchases = purchases
        self.nextBefore = nextBefore
    }
}

/// Finds purchases by any identifier and tells each one's story: one implementation behind `iap-worker find` and the
/// console.
///
/// Which kind an identifier is: an event id by its shape (`<paymentSeq>:item-granted`, `<paymentSeq>:consume-failed:…`,
/// `<topic>/<partition>/<offset>:consume-failed` for a malformed message); otherwise the first of paymentSeq, store
/// payment id and userId under which the ledger holds anything. A caller that knows says so.
public struct PurchaseFinder: Sendable {
    public let reader: any PurchaseHistoryReader
    /// The reconciler's grace, to say when a sighting will be taken.
    public var reconcileGrace: Duration?

    public init(reader: any PurchaseHistoryReader, reconcileGrace: Duration? = nil) {
        self.reader = reader
        self.reconcileGrace = reconcileGrace
    }

    /// The most purchases one store payment id is taken to name.
    static let paymentIdLimit = 50

    /// - Parameters:
    ///   - limit: for a userId, the page size (purchases newest first).
    ///   - before: for a userId, only purchases that first appeared before it.
    /// - Throws: ``LedgerError`` when the ledger fails.
    public func find(_ id: String, as kind: IdentifierKind? = nil, before: Date? = nil, limit: Int = 20) async throws -> FindResult {
        let limit = max(1, min(limit, 1_000))
        if let kind { return try await find(id, kind, before: before, limit: limit) }
        if EventIdentifier(id) != nil { return try await find(id, .eventId, before: before, limit: limit) }
        for kind in [IdentifierKind.paymentSeq, .paymentId, .userId] {
            let result = try await find(id, kind, before: before, limit: limit)
            if !result.purchases.isEmpty { return result }
        }
        return FindResult(id: id, kind: nil, purchases: [])
    }

    func find(_ id: String, _ kind: IdentifierKind, before: Date?, limit: Int) async throws -> FindResult {
        switch kind {
        case .paymentSeq:
            return FindResult(id: id, kind: kind, purchases: try await timelines([id]))
        case .paymentId:
            return FindResult(id: id, kind: kind, purchases: try await timelines(try await reader.paymentSeqs(paymentId: id, limit: Self.paymentIdLimit)))
        case .userId:
            let page = try await reader.purchases(userId: id, before: before, limit: limit)
            let purchases = try await timelines(page.map(\.paymentSeq))
            return FindResult(id: id, kind: kind, purchases: purchases, nextBefore: page.count == limit ? page.last?.firstSeen : nil)
        case .eventId:
            switch EventIdentifier(id) {
            case .paymentSeq(let seq):
                return FindResult(id: id, kind: kind, purchases: try await timelines([seq]))
            case .malformed(let source):
                let letters = try await reader.deadLetters(original: source)
                if let seq = letters.lazy.compactMap(\.paymentSeq).first {
                    return FindResult(id: id, kind: kind, purchases: try await timelines([seq]))
                }
                let purchases = letters.isEmpty ? [] : [PurchaseTimeline(PurchaseHistory(paymentSeq: nil, deadLetters: letters))]
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

/// The CloudEvent ids the worker gives its events (DESIGN §2), read back.
public enum EventIdentifier: Sendable, Hashable {
    case paymentSeq(String)
    /// A malformed message's consume-failed event: where the message was read.
    case malformed(MessageSource)

    public init?(_ id: String) {
        if id.hasSuffix(":item-granted") {
            let seq = String(id.dropLast(":item-granted".count))
            guard !seq.isEmpty else { return nil }
            self = .paymentSeq(seq)
            return
        }
        guard let marker = id.range(of: ":consume-failed") else { return nil }
        let head = String(id[..<marker.lowerBound])
        let tail = id[marker.upperBound...]
        guard !head.isEmpty, tail.isEmpty || tail.hasPrefix(":") else { return nil }
        if tail.isEmpty {
            // `<topic>/<partition>/<offset>:consume-failed`: topic names hold no '/', so the last two parts are numbers.
            let parts = head.split(separator: "/", omittingEmptySubsequences: false)
            if parts.count == 3, let partition = Int32(parts[1]), partition >= 0, let offset = Int64(parts[2]), offset >= 0 {
                self = .malformed(MessageSource(topic: String(parts[0]), partition: partition, offset: offset))
                return
            }
        }
        self = .paymentSeq(head)
    }
}

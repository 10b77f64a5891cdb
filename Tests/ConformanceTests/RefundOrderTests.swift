import Foundation
import Fulfilment
import IAPTestSupport
import Lookup
import Testing

/// Order and quantity never change where a payment ends (DESIGN §4): generated refunds, reversals and partial refunds of
/// one payment, with the purchase arriving anywhere among them, read in every kind of order, on every ledger — checked
/// against one model written from the rule, not from the code.
@Suite("Refund order on SQLite, PostgreSQL and memory", .timeLimit(.minutes(3)))
struct RefundOrderTests {
    typealias T = LedgerStoreTests
    static let events = EventFactory(groupID: "g", itemGrantedTopic: "granted", consumeFailedTopic: "failed")
    static let base = Date(timeIntervalSince1970: 1_764_000_000)

    /// One refund, reversal or partial refund of the scenario's payment, at a store time of `second` (ties happen).
    struct Notice: CustomStringConvertible {
        enum Kind { case refund, reversal, partial }
        var kind: Kind
        var id: String
        var second: Int
        var quantity: Int

        var description: String { "\(kind)@\(second)" }
    }

    /// The rule: the payment is refunded when its latest whole refund has no reversal at or after it.
    static func refunded(_ notices: [Notice]) -> Bool {
        guard let latest = notices.filter({ $0.kind == .refund }).map(\.second).max() else { return false }
        return !notices.contains { $0.kind == .reversal && $0.second >= latest }
    }

    struct Scenario: CustomStringConvertible {
        var notices: [Notice]
        /// The notices in the order they are read, with the purchase's arrival at `arrival` (0: before them all).
        var readOrder: [Int]
        var arrival: Int

        var description: String {
            "notices \(notices), read \(readOrder.map { notices[$0].description }), purchase after \(arrival)"
        }
    }

    static func scenarios(count: Int, seed: UInt64) -> [Scenario] {
        var random = SplitMix(seed)
        return (0..<count).map { n in
            let kinds: [Notice.Kind] = [.refund, .reversal, .partial]
            let notices = (0..<(1 + random.below(5))).map { i in
                Notice(
                    kind: n < 6 ? [.refund, .reversal, .refund][i % 3] : kinds[random.below(3)], id: "s\(n)-n\(i)",
                    second: random.below(4), quantity: 1 + random.below(3))
            }
            var order = Array(notices.indices)
            for i in order.indices.reversed() { order.swapAt(i, random.below(i + 1)) }
            return Scenario(notices: notices, readOrder: order, arrival: random.below(notices.count + 1))
        }
    }

    static func record(_ notice: Notice, paymentId: String) -> StoreNotificationRecord {
        StoreNotificationRecord(
            notification: StoreNotification(
                store: .google, kind: notice.kind == .reversal ? .refundReversed : .refund,
                storeType: "voidedPurchaseNotification", notificationId: notice.id, authenticity: .trustedChannel,
                paymentId: paymentId,
                reason: notice.kind == .partial
                    ? RevocationRecord.googlePartialRefund : "REFUND_TYPE_FULL_REFUND",
                quantity: notice.kind == .partial ? notice.quantity : nil,
                occurredAt: base.addingTimeInterval(Double(notice.second))),
            channel: .googleRTDN, receivedAt: base)
    }

    /// What a game holding the grant has after applying its events in order: whether the whole purchase is taken back,
    /// and which partial refunds took their units. Each event must make sense where it comes.
    static func game(of events: [OutboxEvent], _ scenario: Scenario) throws -> (whole: Bool, partials: Set<String>) {
        var whole = false
        var partials: Set<String> = []
        for event in events where event.topic == "iap.item-revoked" {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(event.payload)) as? [String: Any])
            let data = try #require(object["data"] as? [String: Any])
            let type = try #require(object["type"] as? String)
            let notificationId = try #require(data["notificationId"] as? String)
            if type == EventFactory.refundReversedType {
                #expect(whole, "a reversal with nothing revoked: \(event.id) in \(scenario)")
                whole = false
            } else if data["partial"] as? Bool == true {
                #expect(!whole, "a partial revocation after the whole: \(event.id) in \(scenario)")
                #expect(partials.insert(notificationId).inserted, "a partial refund twice: \(event.id) in \(scenario)")
            } else {
                #expect(!whole, "the whole purchase revoked twice: \(event.id) in \(scenario)")
                whole = true
            }
        }
        return (whole, partials)
    }

    @Test(arguments: LedgerBackend.allCases)
    func everyOrderEndsWhereTheStoresTimesSay(backend: LedgerBackend) async throws {
        let scenarios = Self.scenarios(count: 160, seed: 0x1A9_2026)
        try await TestDatabases.withFreshLedger(backend) { store in
            var step = 0
            func now() -> Date {
                step += 1
                return Self.base.addingTimeInterval(Double(step))
            }
            for (n, scenario) in scenarios.enumerated() {
                let seq = "o\(n)"
                var grant = T.grant(seq)
                grant.paymentId = "GPA.order-\(n)"
                var read: [Notice] = []
                var granted = false
                // The events as the recorder publishes them: each recording's, in its order.
                var published: [OutboxEvent] = []
                for position in 0...scenario.readOrder.count {
                    if position == scenario.arrival {
                        let at = now()
                        let result = try await store.insertGrant(
                            grant, event: T.event("\(seq):item-granted", seq: seq, at: at))
                        #expect(
                            (result == .inserted) == !Self.refunded(read),
                            "the purchase arriving after \(read) was \(result) in \(scenario)")
                        granted = result == .inserted
                    }
                    guard position < scenario.readOrder.count else { break }
                    let notice = scenario.notices[scenario.readOrder[position]]
                    let recording = try await store.record(
                        Self.record(notice, paymentId: "GPA.order-\(n)"), events: Self.events, now: now())
                    published += recording.events
                    read.append(notice)
                }
                if !granted {
                    // The purchase sent again once everything is read: granted exactly when no whole refund stands.
                    let result = try await store.insertGrant(
                        grant, event: T.event("\(seq):item-granted", seq: seq, at: now()))
                    #expect(
                        (result == .inserted) == !Self.refunded(scenario.notices),
                        "the purchase sent again was \(result) in \(scenario)")
                    granted = result == .inserted
                }
                // The sweeper's late match settles what waited for the grant (partial refunds read before it).
                while true {
                    let settled = try await store.settlePendingRefunds(limit: 100, events: Self.events, now: now())
                    if settled.isEmpty { break }
                    published += settled.flatMap(\.events)
                }
                guard granted else { continue }

                let events = try await store.events(paymentSeq: seq)
                #expect(Set(events.map(\.id)) == Set(published.map(\.id) + ["\(seq):item-granted"]), "\(scenario)")
                #expect(published.count == Set(published.map(\.id)).count, "an event id twice in \(scenario)")
                let (whole, partials) = try Self.game(of: published, scenario)
                let refunded = Self.refunded(scenario.notices)
                #expect(whole == refunded, "whole revocation \(whole), refunded \(refunded) in \(scenario)")
                let allPartials = Set(scenario.notices.filter { $0.kind == .partial }.map(\.id))
                if refunded {
                    #expect(partials.isSubset(of: allPartials), "\(scenario)")
                } else {
                    #expect(partials == allPartials, "partials \(partials) of \(allPartials) in \(scenario)")
                }
                // Numbered 1, 2, … as recorded, each with its item-revoked event, and reversals under the same number.
                let revocations = try await store.revocations(paymentSeq: seq)
                #expect(revocations.map(\.number) == (0..<revocations.count).map { $0 + 1 }, "\(scenario)")
                let ids = Set(events.map(\.id))
                for revocation in revocations {
                    #expect(ids.contains(EventFactory.itemRevokedID(paymentSeq: seq, number: revocation.number)))
                    #expect(
                        ids.contains(EventFactory.refundReversedID(paymentSeq: seq, number: revocation.number))
                            == (revocation.reversedBy != nil))
                    #expect(revocation.isPartial == allPartials.contains(revocation.notificationId))
                }
                #expect(events.count == 1 + revocations.count + revocations.filter { $0.reversedBy != nil }.count)
                // The notifications' outcomes say the same: nothing left pending beside the grant.
                let records = try await store.notifications(
                    paymentKey: StorePaymentKey(marketId: "GG", paymentId: "GPA.order-\(n)"))
                #expect(!records.contains { $0.outcome == .pending || $0.outcome == .pendingPartial }, "\(scenario)")
            }
        }
    }

    /// The review's cases by name, after the grant: refund, reversal, refund again — read in each of the six orders —
    /// ends revoked, the second revocation published as `:item-revoked:2` when the first was reversed.
    @Test(arguments: LedgerBackend.allCases)
    func aRefundAfterAReversalRevokesAgain(backend: LedgerBackend) async throws {
        let notices = [
            Notice(kind: .refund, id: "r1", second: 1, quantity: 1),
            Notice(kind: .reversal, id: "v1", second: 2, quantity: 1),
            Notice(kind: .refund, id: "r2", second: 3, quantity: 1),
        ]
        let orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]]
        try await TestDatabases.withFreshLedger(backend) { store in
            for (n, order) in orders.enumerated() {
                let seq = "rvr\(n)"
                var grant = T.grant(seq)
                grant.paymentId = "GPA.rvr-\(n)"
                _ = try await store.insertGrant(
                    grant, event: T.event("\(seq):item-granted", seq: seq, at: Self.base.addingTimeInterval(-60)))
                for i in order {
                    var notice = notices[i]
                    notice.id += "-\(n)"
                    _ = try await store.record(
                        Self.record(notice, paymentId: "GPA.rvr-\(n)"), events: Self.events, now: Self.base)
                }
                let revocations = try await store.revocations(paymentSeq: seq)
                #expect(revocations.last?.reversedBy == nil, "order \(order)")
                let ids = Set(try await store.events(paymentSeq: seq).map(\.id))
                // Read in time order the first revocation is reversed and a second one published; read otherwise, the
                // later refund may stand from the start (one revocation), never none.
                if order == [0, 1, 2] {
                    #expect(
                        ids == [
                            "\(seq):item-granted", "\(seq):item-revoked", "\(seq):refund-reversed",
                            "\(seq):item-revoked:2",
                        ])
                }
                #expect(ids.contains("\(seq):item-revoked"), "order \(order)")
            }
        }
    }

    /// Partial then whole, and a partial before the purchase: the partial never spends the grant's revocation, and a
    /// purchase partly refunded before it arrives is granted, its partial revocation following.
    @Test(arguments: LedgerBackend.allCases)
    func aPartialRefundRevokesItsUnitsAndNeverBlocksTheWhole(backend: LedgerBackend) async throws {
        try await TestDatabases.withFreshLedger(backend) { store in
            var grant = T.grant("q1")
            grant.paymentId = "GPA.q1"
            _ = try await store.insertGrant(grant, event: T.event("q1:item-granted", seq: "q1"))
            let first = try await store.record(
                Self.record(Notice(kind: .partial, id: "part-1", second: 1, quantity: 2), paymentId: "GPA.q1"),
                events: Self.events, now: Self.base)
            #expect(first.outcome == .revoked && first.events.map(\.id) == ["q1:item-revoked"])
            let second = try await store.record(
                Self.record(Notice(kind: .partial, id: "part-2", second: 2, quantity: 1), paymentId: "GPA.q1"),
                events: Self.events, now: Self.base)
            #expect(second.outcome == .revoked && second.events.map(\.id) == ["q1:item-revoked:2"])
            let whole = try await store.record(
                Self.record(Notice(kind: .refund, id: "whole", second: 3, quantity: 1), paymentId: "GPA.q1"),
                events: Self.events, now: Self.base)
            #expect(whole.outcome == .revoked && whole.events.map(\.id) == ["q1:item-revoked:3"])
            // `find` tells each revocation with its event id, and where the grant stands.
            let found = try #require(try await PurchaseFinder(reader: store, refunds: store).find("q1").purchases.first)
            let lines = found.entries.filter { $0.kind == .revocation }
            #expect(
                Set(lines.compactMap { $0.fields["event_id"] }) == [
                    "q1:item-revoked", "q1:item-revoked:2", "q1:item-revoked:3",
                ])
            #expect(found.status.hasSuffix("; revoked (refunded); 2 partial refunds (3 units)"), "\(found.status)")
            let firstEvent = try #require(first.events.first)
            // Quantities at their worst (Int.max twice): find still tells the grant, its units saturated.
            var huge = T.grant("q3")
            huge.paymentId = "GPA.q3"
            _ = try await store.insertGrant(huge, event: T.event("q3:item-granted", seq: "q3"))
            for (i, id) in ["big-1", "big-2"].enumerated() {
                var notice = Self.record(Notice(kind: .partial, id: id, second: i, quantity: 1), paymentId: "GPA.q3")
                notice.notification.quantity = Int.max
                _ = try await store.record(notice, events: Self.events, now: Self.base)
            }
            let hugeFound = try #require(
                try await PurchaseFinder(reader: store, refunds: store).find("q3").purchases.first)
            #expect(hugeFound.status.hasSuffix("; 2 partial refunds (\(Int.max) units)"), "\(hugeFound.status)")
            let payload = try #require(
                try JSONSerialization.jsonObject(with: Data(firstEvent.payload)) as? [String: Any])
            let data = try #require(payload["data"] as? [String: Any])
            #expect(data["partial"] as? Bool == true && data["quantity"] as? Int == 2)
            #expect(data["reason"] as? String == "partial_refund")

            // Before the purchase: kept `pending_partial`, the purchase granted, then the partial settled.
            let early = try await store.record(
                Self.record(Notice(kind: .partial, id: "early-part", second: 1, quantity: 1), paymentId: "GPA.q2"),
                events: Self.events, now: Self.base)
            #expect(early.outcome == .pendingPartial && early.events.isEmpty)
            var later = T.grant("q2")
            later.paymentId = "GPA.q2"
            #expect(try await store.insertGrant(later, event: T.event("q2:item-granted", seq: "q2")) == .inserted)
            let settled = try await store.settlePendingRefunds(limit: 10, events: Self.events, now: Self.base)
            #expect(settled.map(\.outcome) == [.revoked])
            #expect(settled.first?.events.map(\.id) == ["q2:item-revoked"])
            #expect(try await store.notification(id: "early-part")?.outcome == .revoked)
            #expect(try await store.settlePendingRefunds(limit: 10, events: Self.events, now: Self.base).isEmpty)
        }
    }
}
